/**
 * The log's side of C2SP tlog-witness: `POST <prefix>/add-checkpoint` with `old <size>`, the
 * consistency proof lines, a blank line and the signed checkpoint. 409 answers the size the
 * witness has (text/x.tlog.size): the caller proves from there instead. A 200 answer is
 * cosignature lines, kept only if they verify with the witness's configured key.
 */
import { malformed } from "./errors.js";
import type { Hash } from "./merkle.js";
import { openNote, parseNote, type NoteVerifier } from "./note.js";

export interface WitnessConfig {
  /** the witness's cosigner name (its key name) */
  readonly name: string;
  /** the submission prefix; `/add-checkpoint` is appended */
  readonly url: string;
  /** the witness's cosignature/v1 verifier */
  readonly verifier: NoteVerifier;
}

export type Submission =
  | { readonly ok: true; readonly lines: string }
  | { readonly ok: false; readonly conflict: number }
  | { readonly ok: false; readonly status: number; readonly message: string };

const MAX_RESPONSE_BYTES = 64 * 1024;

export function addCheckpointBody(oldSize: number, proof: readonly Hash[], note: string): string {
  return `old ${oldSize}\n${proof.map((h) => `${h.toString("base64")}\n`).join("")}\n${note}`;
}

/** Submits `note` (a signed checkpoint) with its proof from `oldSize`; never throws for an answer, only for a transport failure. */
export async function submitCheckpoint(witness: WitnessConfig, note: string, oldSize: number, proof: readonly Hash[], timeoutMs = 10_000): Promise<Submission> {
  const response = await fetch(`${witness.url.replace(/\/+$/, "")}/add-checkpoint`, {
    method: "POST",
    headers: { "content-type": "text/plain; charset=utf-8" },
    body: addCheckpointBody(oldSize, proof, note),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = await response.text();
  if (body.length > MAX_RESPONSE_BYTES) return { ok: false, status: response.status, message: "answer too large" };
  if (response.status === 409 && /^(0|[1-9][0-9]*)\n$/.test(body)) return { ok: false, conflict: Number(body.trim()) };
  if (response.status !== 200) return { ok: false, status: response.status, message: body.slice(0, 300).trim() };
  const checkpointText = parseNote(note).text;
  const lines = body.split("\n").filter((l) => l !== "");
  // Only the witness's own, valid cosignatures are kept (unknown keys are ignored, per the spec).
  const candidate = parseNote(`${checkpointText}\n${lines.map((l) => `${l}\n`).join("")}`);
  const own = candidate.signatures.filter((s) => s.name === witness.verifier.name && s.keyId === witness.verifier.keyId);
  if (own.length === 0) throw malformed("witness-answer-invalid", `witness ${witness.name} answered no cosignature of its key`);
  openNote({ text: checkpointText, signatures: own }, [witness.verifier]);
  return { ok: true, lines: lines.filter((l) => own.some((s) => l.startsWith(`\u2014 ${s.name} `))).map((l) => `${l}\n`).join("") };
}
