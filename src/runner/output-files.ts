/**
 * Where a run's captured agent output lives (`<outputDir>/<run_id>.stdout|.stderr`, written by
 * OutputCapture) and how its end is read back for the operator: a bounded window from the end,
 * cut to whole lines. The run id is checked to be a UUID before it names a file, and the file is
 * opened without following links and checked private, so no request can read outside the
 * directory.
 */
import { join } from "node:path";
import { errnoCode, NotFoundError, ValidationError } from "../core/errors.js";
import { isRunId } from "../journal/schema.js";
import { openPrivateFile } from "../storage/secure-fs.js";

export type OutputStream = "stdout" | "stderr";

export interface OutputTail {
  readonly stream: OutputStream;
  /** bytes in the file now */
  readonly size: number;
  /** where `text` starts in the file */
  readonly offset: number;
  readonly text: string;
}

export function outputPath(outputDir: string, runId: string, stream: OutputStream): string {
  return join(outputDir, `${runId}.${stream}`);
}

/**
 * The last `maxBytes` of a captured stream, from the first line that starts inside the window (a
 * window that starts the file keeps its first line). Not found: the run was not run by this node,
 * its output was removed by retention, or it has not started yet.
 */
export async function readOutputTail(outputDir: string, runId: string, stream: OutputStream, maxBytes: number): Promise<OutputTail> {
  if (!isRunId(runId)) throw new ValidationError("run-id-invalid", "a run id is a lowercase UUID", { details: { run_id: runId } });
  let fh;
  try {
    fh = await openPrivateFile(outputPath(outputDir, runId, stream));
  } catch (error) {
    if (errnoCode(error) !== "ENOENT") throw error;
    throw new NotFoundError("run-output-not-found", `this node holds no ${stream} of run ${runId}: only the node that ran it keeps it, until result retention removes it`, {
      details: { run_id: runId, stream },
    });
  }
  try {
    const { size } = await fh.stat();
    const start = Math.max(0, size - maxBytes);
    // One byte more in front: whether the window starts a line (the byte before it is a newline).
    const from = Math.max(0, start - 1);
    const buffer = Buffer.alloc(size - from);
    const { bytesRead } = await fh.read(buffer, 0, buffer.byteLength, from);
    const read = buffer.subarray(0, bytesRead);
    // Cut after the first newline, so the text starts a line; a window inside one line is kept as it is.
    const newline = start === 0 ? -1 : read.indexOf(0x0a);
    const cut = newline >= 0 && newline < read.byteLength - 1 ? newline + 1 : start - from;
    return { stream, size: from + bytesRead, offset: from + cut, text: new TextDecoder("utf-8", { fatal: false }).decode(read.subarray(cut)) };
  } finally {
    await fh.close();
  }
}
