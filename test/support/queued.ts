/** A submission as the queue stores take it, for the queue's store and runner tests. */
import { randomUUID } from "node:crypto";
import { sha256Digest } from "../../src/core/digest.js";
import type { NewQueued } from "../../src/invocations/queue-store.js";

/** A queued claude invocation of `api:ops` in the default workspace, due in an hour from `now`; `fields` override. */
export function queuedRow(fields: Partial<NewQueued> = {}, now: number = Date.now()): NewQueued {
  const request = fields.request ?? JSON.stringify({ provider: "claude", prompt: "p" });
  return {
    scope: "api:ops",
    id: randomUUID(),
    request,
    request_hash: sha256Digest(request),
    principal: "api:ops",
    workspace: "default",
    provider: "claude",
    priority: 0,
    labels: {},
    enqueued_at: now,
    deadline: now + 3_600_000,
    ...fields,
  };
}
