/**
 * A C2SP tlog-witness (c2sp.org/tlog-witness) `add-checkpoint`: verifies a log's checkpoint with
 * the log keys it trusts, checks the consistency proof from the size it recorded for that origin,
 * and only then records the new checkpoint and answers a `cosignature/v1` line. The check and the
 * record are one transaction of its store, so two requests can never roll it back.
 */
import { decodeBase64Strict } from "../core/base64.js";
import type { SigningKey } from "../journal/types.js";
import { parseCheckpointText } from "../tlog/checkpoint.js";
import { cosign } from "../tlog/cosignature.js";
import { EMPTY_ROOT, HASH_BYTES, verifyConsistency, type Hash } from "../tlog/merkle.js";
import { formatNote, formatVkey, openNote, parseNote, SIG_COSIGNATURE_V1, type NoteVerifier } from "../tlog/note.js";

export interface WitnessRecord {
  readonly size: number;
  readonly root: Hash;
  /** the checkpoint as cosigned: the log's signatures and the witness's */
  readonly note: string;
}

export interface WitnessStore {
  /**
   * Runs `decide` with the origin's record and stores what it returns, atomically with the read
   * (one transaction). `decide` throws to store nothing.
   */
  update(origin: string, decide: (current: WitnessRecord | undefined) => WitnessRecord): WitnessRecord;
  get(origin: string): WitnessRecord | undefined;
}

/** The answer to one request: an HTTP status, a content type and a body. */
export interface WitnessAnswer {
  readonly status: number;
  readonly type: string;
  readonly body: string;
}

const MAX_PROOF_LINES = 63;
const TEXT = "text/plain; charset=utf-8";

class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = TEXT,
  ) {
    super(message);
  }
}

export class Witness {
  readonly name: string;
  readonly #key: SigningKey;
  readonly #logs: readonly NoteVerifier[];
  readonly #store: WitnessStore;
  readonly #now: () => number;

  constructor(options: { name: string; key: SigningKey; logs: readonly NoteVerifier[]; store: WitnessStore; now?: () => number }) {
    this.name = options.name;
    this.#key = options.key;
    this.#logs = options.logs;
    this.#store = options.store;
    this.#now = options.now ?? (() => Math.floor(Date.now() / 1000));
  }

  /** This witness's cosignature verifier key, for the logs and the policies that trust it. */
  get vkey(): string {
    return formatVkey(this.name, SIG_COSIGNATURE_V1, this.#key.public_key);
  }

  addCheckpoint(body: string): WitnessAnswer {
    try {
      return { status: 200, type: TEXT, body: this.#add(body) };
    } catch (error) {
      if (error instanceof Refusal) return { status: error.status, type: error.type, body: `${error.message}\n` };
      const code = (error as { code?: unknown }).code;
      if (code === "note-not-verified") return { status: 403, type: TEXT, body: `${(error as Error).message}\n` };
      if (typeof code === "string" && /malformed|invalid/.test(code)) return { status: 400, type: TEXT, body: `${(error as Error).message}\n` };
      throw error;
    }
  }

  /** The latest checkpoint this witness cosigned for `origin` (the monitoring API). */
  checkpoint(origin: string): string | undefined {
    return this.#store.get(origin)?.note;
  }

  #add(body: string): string {
    const split = body.indexOf("\n\n");
    if (split < 0) throw new Refusal(400, "the body is an old size line, proof lines, a blank line and a checkpoint");
    const head = body.slice(0, split).split("\n");
    const oldMatch = /^old (0|[1-9][0-9]{0,15})$/.exec(head[0] ?? "");
    if (oldMatch === null) throw new Refusal(400, "the first line is `old <size>`");
    const oldSize = Number(oldMatch[1]);
    if (head.length - 1 > MAX_PROOF_LINES) throw new Refusal(400, `at most ${MAX_PROOF_LINES} proof lines`);
    const proof = head.slice(1).map((line) => {
      const hash = decodeBase64Strict(line, HASH_BYTES);
      if (hash === undefined) throw new Refusal(400, "a proof line is the base64 of a 32-byte hash");
      return hash;
    });
    const note = parseNote(body.slice(split + 2));
    const checkpoint = parseCheckpointText(note.text);
    const logs = this.#logs.filter((l) => l.name === checkpoint.origin);
    if (logs.length === 0) throw new Refusal(404, `unknown log origin ${checkpoint.origin}`);
    // Only the log's own signatures count; a signature of its key that fails is a 403.
    openNote(note, logs);
    if (oldSize > checkpoint.size) throw new Refusal(400, `old size ${oldSize} is larger than the checkpoint's ${checkpoint.size}`);
    if (checkpoint.size === 0 && !checkpoint.root.equals(EMPTY_ROOT)) throw new Refusal(422, "a tree of size 0 has the empty tree's root");
    let line = "";
    this.#store.update(checkpoint.origin, (current) => {
      const recorded = current?.size ?? 0;
      if (oldSize !== recorded) throw new Refusal(409, String(recorded), "text/x.tlog.size");
      if (oldSize === 0 && proof.length > 0) throw new Refusal(422, "no proof is sent from size 0");
      if (current !== undefined && oldSize === checkpoint.size) {
        if (!current.root.equals(checkpoint.root)) throw new Refusal(422, `a different tree of size ${oldSize} than the one this witness cosigned: the log forked`);
      } else if (current !== undefined && !verifyConsistency(oldSize, checkpoint.size, current.root, checkpoint.root, proof)) {
        throw new Refusal(422, `the consistency proof from ${oldSize} to ${checkpoint.size} does not verify: the log forked or rewrote its history`);
      }
      line = cosign(this.name, this.#key, note.text, this.#now());
      return { size: checkpoint.size, root: checkpoint.root, note: formatNote({ text: note.text, signatures: note.signatures.filter((sig) => logs.some((l) => l.name === sig.name && l.keyId === sig.keyId)) }) + line };
    });
    return line;
  }
}
