/** Run journals, their verification and live events; the node's public keys; health. */
import { Type, type Static } from "typebox";
import { Count, List, Uuid } from "./common.js";
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

export const Health = Type.Object({ status: Type.Literal("ok") });
export const Readiness = Type.Object({ status: Type.Literal("ready"), log: Type.Optional(LogState) });
