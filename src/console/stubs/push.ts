/** The browser's stand-in for src/client/push.ts: pushing reads a directory from disk, which a page cannot. */
import type { PushOptions, PushResult, StageApi } from "../../client/push.js";

export function pushDirectory(_api: StageApi, _dir: string, _options: PushOptions = {}): Promise<PushResult> {
  return Promise.reject(new Error("pushing a bundle reads a directory: use `warden push <dir>`"));
}
