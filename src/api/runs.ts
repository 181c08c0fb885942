/** Run journals, their verification and live events; the node's public keys; health. */
import { Type, type Static } from "typebox";
import { Count, Digest, List, Uuid } from "./common.js";
import { Finding, VerifyErrorView } from "./invocations.js";
import { LogState } from "./log.js";

export const JOURNAL_CONTENT_TYPE = "application/x-ndjson";
export const EVENTS_CONTENT_TYPE = "text/event-stream";

/** The journal file as stored: one signed entry per line (`{"entry":…,"sig":"…"}`). */
export const JournalBody = Type.Unknown({ description: "application/x-ndjson: the run's signed journal lines" });
/** One message per journal entry (`id: <seq>`, `data: <signed line>`), then `event: end`. */
export const EventStreamBody = Type.Unknown({ description: "text/event-stream of the run's journal entries" });

export const RunParams = Type.Object({ run_id: Uuid }, { additionalProperties: false });
export type RunParams = Static<typeof RunParams>;

export const Verification = Type.Object({
  ok: Type.Boolean(),
  entries: Count,
  first_error: Type.Optional(VerifyErrorView),
  requires_reconciliation: Type.Boolean(),
  /** lowercase hex sha256 of the last valid line */
  tail_hash: Type.String(),
  incomplete_tail: Type.Boolean(),
  findings: List(Finding),
});
export type Verification = Static<typeof Verification>;

export const PublicKey = Type.Object({ key_id: Type.String(), public_key: Type.String({ description: "standard base64 of the raw 32-byte Ed25519 key" }) });
export const KeyList = Type.Object({ keys: List(PublicKey) });
export type KeyList = Static<typeof KeyList>;

/** A DSSE envelope (DESIGN.md "Attestations"): the node's signed in-toto statement about a run's change set. */
export const AttestationEnvelope = Type.Object(
  {
    payload: Type.String({ description: "standard base64 of the statement's RFC 8785 bytes" }),
    payloadType: Type.String({ description: "application/vnd.in-toto+json" }),
    signatures: List(
      Type.Object(
        {
          keyid: Type.String({ description: "the node key's key_id (GET /v1/keys)" }),
          sig: Type.String({ description: "standard base64 of the Ed25519 signature of PAE(payloadType, payload)" }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type AttestationEnvelope = Static<typeof AttestationEnvelope>;

export const Health = Type.Object({ status: Type.Literal("ok") });
export const Readiness = Type.Object({ status: Type.Literal("ready"), log: Type.Optional(LogState) });

/** `GET /v1/runs/{run_id}/output/{stream}`: which of the agent's captured streams. */
export const OutputParams = Type.Object(
  { run_id: Uuid, stream: Type.Union([Type.Literal("stdout"), Type.Literal("stderr")]) },
  { additionalProperties: false },
);
export type OutputParams = Static<typeof OutputParams>;

export const OUTPUT_TAIL_MAX = 65_536;
export const OutputQuery = Type.Object(
  { tail: Type.Optional(Type.Integer({ minimum: 1, maximum: OUTPUT_TAIL_MAX, default: 16_384, description: "at most this many bytes from the end" })) },
  { additionalProperties: false },
);
export type OutputQuery = Static<typeof OutputQuery>;

/** The end of one captured stream of a run's agent, as the node that ran it holds it now. */
export const OutputTail = Type.Object({
  stream: Type.Union([Type.Literal("stdout"), Type.Literal("stderr")]),
  /** bytes in the node's file so far (it keeps a stream's first runOutputBytes) */
  size: Count,
  /** where `text` starts in the file: past the first newline of the window, unless the window starts the file */
  offset: Count,
  /** UTF-8 (invalid sequences replaced) */
  text: Type.String(),
});
export type OutputTail = Static<typeof OutputTail>;

/** `GET /v1/runs/{run_id}/changes`: `?stat` (any value but `false` or `0`) answers the stat form. */
export const ChangesQuery = Type.Object({ stat: Type.Optional(Type.String({ description: "present: the stat form (paths, statuses, line counts) instead of the manifest" })) }, { additionalProperties: false });
export type ChangesQuery = Static<typeof ChangesQuery>;

/** A run's change set: its digest (sha256 of the manifest's canonical bytes) and the manifest (DESIGN.md "Change sets"). */
export const RunChangeSet = Type.Object({
  run_id: Uuid,
  change_set: Digest,
  manifest: Type.Unknown({ description: "the change-set manifest {v, base, files, patch}, checked against change_set" }),
});
export type RunChangeSet = Static<typeof RunChangeSet>;

export const ChangeStatFile = Type.Object({
  path: Type.String(),
  old_path: Type.Union([Type.String(), Type.Null()]),
  status: Type.Union([Type.Literal("added"), Type.Literal("modified"), Type.Literal("deleted"), Type.Literal("renamed")]),
  binary: Type.Boolean(),
  lines_added: Type.Union([Count, Type.Null()]),
  lines_deleted: Type.Union([Count, Type.Null()]),
});
export const ChangeStat = Type.Object({
  run_id: Uuid,
  change_set: Digest,
  base: Type.String(),
  files_total: Count,
  files: List(ChangeStatFile),
  lines_added: Count,
  lines_deleted: Count,
});
export type ChangeStat = Static<typeof ChangeStat>;

export const ChangeBlobParams = Type.Object({ run_id: Uuid, digest: Digest }, { additionalProperties: false });
export type ChangeBlobParams = Static<typeof ChangeBlobParams>;
export const ChangeBlobBody = Type.Unknown({ description: "application/octet-stream: the blob's bytes, checked against its digest" });
