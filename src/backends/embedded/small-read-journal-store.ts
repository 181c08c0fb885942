/**
 * The embedded journal store with a synchronous fast path for small reads. A cached replay reads
 * its run's journal (a few KB) to compare it with the stored seal; through the async path that
 * is four or five threadpool round trips, and on a busy machine each can wait its turn, which is
 * what a replay's tail latency is made of. A small private file is read here with three
 * syscalls instead (a few tens of microseconds on the event loop). Large reads, and every
 * read that fails, go through the store's own async path, which also gives failures their meaning.
 */
import { readPrivateFileSync } from "../../storage/secure-fs.js";
import { EmbeddedJournalStore } from "./journal-store.js";

/** Reads up to this size may block the event loop. */
export const SMALL_READ_MAX_BYTES = 256 * 1024;

export class SmallReadJournalStore extends EmbeddedJournalStore {
  override async read(runId: string, maxBytes: number): Promise<Uint8Array | undefined> {
    if (maxBytes <= SMALL_READ_MAX_BYTES) {
      try {
        return readPrivateFileSync(this.pathOf(runId), maxBytes);
      } catch {
        // Missing, too large or unsafe: the async path answers (undefined or the right error).
      }
    }
    return super.read(runId, maxBytes);
  }
}
