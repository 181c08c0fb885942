/**
 * A run's journal as Server-Sent Events: every entry already written, then each one as it is
 * appended (the journal tap signals durable appends; the journal is read from where the stream
 * stands, each byte once, so what is sent is exactly what is stored). One message per entry — `id: <seq>`,
 * `data: <the signed line>` — and a final `event: end` when the run terminated, when no process
 * is writing it any more (a cut run), or at shutdown. `Last-Event-ID` resumes after that seq.
 *
 * A run written by another process (another node of a fleet, or another process on the same
 * home) sends this one no signals: while its claim reads `in_progress` — its owner is alive — the
 * journal is re-read every REMOTE_POLL_MS instead, until it terminates or its owner is gone.
 */
import { PassThrough, type Readable } from "node:stream";
import type { Warden } from "../warden/facade.js";

const HEARTBEAT_MS = 15_000;
const REMOTE_POLL_MS = 500;
const NEWLINE = 0x0a;

export interface JournalEventStream {
  readonly stream: Readable;
  /** ends the stream with `event: end` and `reason` */
  end(reason: string): void;
}

/**
 * The invocation named by the journal's first line (a run.started entry); null when the first line
 * is not one, undefined while no whole line is written yet.
 */
function invocationOf(journal: Buffer): { readonly scope: string; readonly id: string } | null | undefined {
  const end = journal.indexOf(NEWLINE);
  if (end < 0) return undefined;
  try {
    const parsed = JSON.parse(journal.subarray(0, end).toString("utf8")) as { entry?: { event?: { type?: unknown; invocation?: { scope?: unknown; id?: unknown } } } };
    const invocation = parsed.entry?.event?.type === "run.started" ? parsed.entry.event.invocation : undefined;
    return typeof invocation?.scope === "string" && typeof invocation.id === "string" ? { scope: invocation.scope, id: invocation.id } : null;
  } catch {
    return null;
  }
}

export function journalEventStream(warden: Warden, runId: string, afterSeq: number): JournalEventStream {
  const out = new PassThrough();
  let sentBytes = 0;
  /** The run's invocation, from the journal's first line (undefined until it is read). */
  let invocation: { readonly scope: string; readonly id: string } | null | undefined;
  let pumping = false;
  let again = false;
  let ended = false;

  const write = (text: string): void => {
    if (!ended) out.write(text);
  };
  const end = (reason: string): void => {
    if (ended) return;
    write(`event: end\ndata: ${JSON.stringify({ reason })}\n\n`);
    ended = true;
    cleanup();
    out.end();
  };
  const heartbeat = setInterval(() => write(": keep-alive\n\n"), HEARTBEAT_MS);
  heartbeat.unref();
  const unsubscribe = warden.subscribeJournal(runId, () => void pump());
  let poll: NodeJS.Timeout | undefined;
  const cleanup = (): void => {
    clearInterval(heartbeat);
    clearTimeout(poll);
    unsubscribe();
  };
  out.on("close", () => {
    ended = true;
    cleanup();
  });

  async function pump(): Promise<void> {
    if (pumping) {
      again = true;
      return;
    }
    pumping = true;
    try {
      do {
        again = false;
        // Liveness first: if no writer is open now, the read below sees every line there will be.
        const live = warden.journalIsLive(runId);
        const read = await warden.readJournalFrom(runId, sentBytes);
        if (read === undefined) return end("not-found");
        const bytes = Buffer.from(read.buffer, read.byteOffset, read.byteLength);
        if (sentBytes === 0 && invocation === undefined) invocation = invocationOf(bytes);
        const last = bytes.lastIndexOf(NEWLINE);
        if (last >= 0) {
          const text = bytes.subarray(0, last + 1).toString("utf8");
          sentBytes += last + 1;
          for (const line of text.split("\n")) {
            if (line === "") continue;
            if (sendLine(line)) return end("terminated");
          }
        }
        if (!live) {
          if (!(await runningElsewhere())) return end("not-running");
          clearTimeout(poll);
          poll = setTimeout(() => void pump(), REMOTE_POLL_MS);
        }
      } while (again && !ended);
    } catch {
      end("error");
    } finally {
      pumping = false;
    }
  }

  /** True while another process owns the run: its claim (named by the journal's first line) reads in_progress. */
  async function runningElsewhere(): Promise<boolean> {
    if (invocation === undefined || invocation === null) return false;
    return (await warden.lookup(invocation.scope, invocation.id))?.status === "in_progress";
  }

  /** Sends one line; true when it is the run's last entry. */
  function sendLine(line: string): boolean {
    let seq: number | undefined;
    let terminated = false;
    try {
      const parsed = JSON.parse(line) as { entry?: { seq?: unknown; event?: { type?: unknown } } };
      seq = typeof parsed.entry?.seq === "number" ? parsed.entry.seq : undefined;
      terminated = parsed.entry?.event?.type === "run.terminated";
    } catch {
      // A damaged line is still sent as stored; verification is what judges it.
    }
    if (seq !== undefined && seq <= afterSeq) return terminated;
    write(`${seq === undefined ? "" : `id: ${seq}\n`}data: ${line}\n\n`);
    return terminated;
  }

  void pump();
  return { stream: out, end };
}
