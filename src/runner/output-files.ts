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
    const window = Buffer.alloc(size - start);
    const { bytesRead } = await fh.read(window, 0, window.byteLength, start);
    let bytes = window.subarray(0, bytesRead);
    let offset = start;
    if (start > 0) {
      // Drop the line the window cut into; a window with no newline at all is shown as it is.
      const newline = bytes.indexOf(0x0a);
      if (newline >= 0 && newline < bytes.byteLength - 1) {
        bytes = bytes.subarray(newline + 1);
        offset += newline + 1;
      }
    }
    return { stream, size: start + bytesRead, offset, text: new TextDecoder("utf-8", { fatal: false }).decode(bytes) };
  } finally {
    await fh.close();
  }
}
