/**
 * Worker-thread entry of the claim store's writes (claim-write-channel.ts): its own connection to
 * the claims database, where each group commit's COMMIT — and the WAL fsync it waits for — blocks
 * this thread instead of the event loop. Requests arriving while a transaction commits are grouped
 * into the next one, exactly as on the event loop; each answer is sent only after its COMMIT.
 */
import { parentPort, workerData } from "node:worker_threads";
import { WardenError } from "../../../core/errors.js";
import { ClaimWriter } from "./claim-writer.js";
import { applyClaimWrite, type ClaimWriteRequest, type ClaimWriteReply, type ClaimWriterConfig, type SerializedError } from "./claim-write-protocol.js";
import { openPrivateDatabase, sqliteFailure, type SqliteDatabase } from "../../../storage/sqlite.js";

type Incoming = { readonly kind: "open"; readonly config: ClaimWriterConfig } | { readonly kind: "ops"; readonly ops: readonly ClaimWriteRequest[] } | { readonly kind: "close" };

let db: SqliteDatabase | undefined;
let writer: ClaimWriter | undefined;
let replies: ClaimWriteReply[] = [];
let replyScheduled = false;
/**
 * Fault-injection seam for tests (set only through the spawner's workerData): the thread exits
 * after its first COMMIT, before answering — the window where a claim is durable and its caller
 * has not been told.
 */
const exitBeforeFirstReply = (workerData as { exitBeforeFirstReply?: boolean } | null | undefined)?.exitBeforeFirstReply === true;

function serialize(error: unknown): SerializedError {
  const typed = error instanceof WardenError ? error : sqliteFailure(error, "write the claim store");
  return { name: typed.name, code: typed.code, message: typed.message, status: typed.status, ...(typed.details === undefined ? {} : { details: typed.details }) };
}

/** Answers go out together, once per burst of settled writes (one COMMIT settles many). */
function reply(answer: ClaimWriteReply): void {
  replies.push(answer);
  if (replyScheduled) return;
  replyScheduled = true;
  queueMicrotask(() => {
    if (exitBeforeFirstReply) process.exit(1);
    replyScheduled = false;
    const out = replies;
    replies = [];
    parentPort?.postMessage({ kind: "replies", replies: out, commits: writer?.commits ?? 0 });
  });
}

parentPort?.on("message", (message: Incoming) => {
  switch (message.kind) {
    case "open":
      try {
        db = openPrivateDatabase(message.config.path, message.config.database);
        writer = new ClaimWriter(db, message.config.owner, message.config.maxClaims);
        parentPort?.postMessage({ kind: "opened" });
      } catch (error) {
        parentPort?.postMessage({ kind: "open-failed", error: serialize(error) });
      }
      return;
    case "ops":
      for (const request of message.ops) {
        const w = writer;
        const settled = w === undefined ? Promise.reject(new Error("the claim writer is not open")) : applyClaimWrite(w, request);
        settled.then(
          (value) => reply({ id: request.id, ok: true, value }),
          (error: unknown) => reply({ id: request.id, ok: false, error: serialize(error) }),
        );
      }
      return;
    case "close":
      void (async () => {
        await writer?.close();
        db?.close();
        writer = undefined;
        db = undefined;
        parentPort?.postMessage({ kind: "closed" });
      })();
      return;
  }
});
