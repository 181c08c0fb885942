/**
 * Child of full-disk-writes.test.ts, run on a small tmpfs of its own (argv[2]): fills the file
 * system as an agent writing into a workspace on the node's disk would, then makes the node's two
 * writers meet the full disk and prints what they left, one JSON object:
 * - a run's journal: a line the disk takes only part of (the rest of the file's last page);
 * - an agent's output capture: a stream the file can take none of.
 */
import * as fs from "node:fs";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { PassThrough } from "node:stream";
import { EmbeddedJournalStore } from "../../../src/backends/embedded/journal/journal-store.js";
import { generateSigningKey } from "../../../src/journal/keys.js";
import { JournalWriter } from "../../../src/journal/writer.js";
import { verifyJournal } from "../../../src/journal/verify.js";
import { OutputCapture } from "../../../src/runner/capture.js";
import { sha256Digest } from "../../../src/core/digest.js";
import { recordOf, started } from "../../journal/helpers.js";

const disk = process.argv[2]!;
const key = generateSigningKey().key;
const store = new EmbeddedJournalStore(join(disk, "journals"));
const writer = await JournalWriter.create({ store, key, runId: randomUUID() });
await writer.append(started());
const capture = await OutputCapture.create({ path: join(disk, "run.stdout"), tailBytes: 64, maxLineBytes: 0, maxFileBytes: 1 << 20 });

// Every free block taken, as `dd if=/dev/zero of=fill` takes them.
const fill = fs.openSync(join(disk, "fill"), "w");
const block = Buffer.alloc(4096);
try {
  for (;;) fs.writeSync(fill, block);
} catch (error) {
  if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
}
// What is left: the rest of the journal's last page (tmpfs gives a file whole pages).
const journalPath = store.pathOf(writer.runId);
const before = fs.readFileSync(journalPath);

const note = { type: "note", filler: "x".repeat(6000) } as const;
const refused = await writer.append(note).then(
  () => "appended",
  (error: { code?: string }) => error.code ?? "error",
);
const after = fs.readFileSync(journalPath);
const report = verifyJournal(after, [recordOf(key)]);
const again = await writer.append({ type: "note", after: true }).then(
  () => "appended",
  (error: { code?: string }) => error.code ?? "error",
);

const stream = new PassThrough();
const attached = capture.attach(stream);
const printed = Buffer.alloc(256 * 1024, 0x61);
stream.end(printed);
await attached;
const summary = await capture.finish().then(
  (s) => s,
  (error: { code?: string }) => ({ thrown: error.code ?? "error" }),
);
const stored = fs.readFileSync(join(disk, "run.stdout"));

process.stdout.write(
  `${JSON.stringify({
    journal: {
      room: 4096 - (before.byteLength % 4096),
      before: before.byteLength,
      after: after.byteLength,
      refused,
      again,
      ok: report.ok,
      entries: report.entries,
      incomplete_tail: report.incomplete_tail,
      first_error: report.first_error?.code ?? null,
    },
    capture: { summary, printed_sha256: sha256Digest(printed), stored_bytes: stored.byteLength, stored_is_prefix: printed.subarray(0, stored.byteLength).equals(stored) },
  })}\n`,
);
