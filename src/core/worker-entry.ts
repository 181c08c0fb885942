/**
 * Where a worker thread's entry module is, beside the module that starts it. Compiled, the entry
 * is a .js file a plain Worker loads, so there is a default way to start it. Run from TypeScript
 * source (tests and benches through tsx), a plain Worker cannot load a .ts entry: there is no
 * default, and callers that want the worker pass a spawn that sets their loader up.
 */
import { Worker } from "node:worker_threads";

export interface WorkerEntry {
  readonly url: URL;
  /** starts the worker from a compiled build; undefined when running from source */
  readonly defaultSpawn: (() => Worker) | undefined;
}

/** `name` without extension, resolved against the caller's `import.meta.url`. */
export function workerEntry(name: string, importMetaUrl: string): WorkerEntry {
  const fromSource = importMetaUrl.endsWith(".ts");
  const url = new URL(`./${name}${fromSource ? ".ts" : ".js"}`, importMetaUrl);
  return { url, defaultSpawn: fromSource ? undefined : (): Worker => new Worker(url) };
}
