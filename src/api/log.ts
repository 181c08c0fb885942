/** The transparency log (DESIGN.md "Transparency"): C2SP tlog-tiles resources and proofs by API. */
import { Type, type Static } from "typebox";
import { Count, List, Uuid } from "./common.js";

export const CHECKPOINT_CONTENT_TYPE = "text/plain; charset=utf-8";
export const TILE_CONTENT_TYPE = "application/octet-stream";

export const CheckpointBody = Type.Unknown({ description: "text/plain: a C2SP tlog-checkpoint signed note" });
export const TileBody = Type.Unknown({ description: "application/octet-stream: a C2SP tlog-tiles tile or entry bundle" });
export const TileParams = Type.Object({ "*": Type.String({ maxLength: 64 }) }, { additionalProperties: false });

const Size = Type.String({ pattern: "^(0|[1-9][0-9]{0,15})$", description: "a tree size or leaf index, decimal" });
export const InclusionParams = Type.Object({ index: Size, size: Size }, { additionalProperties: false });
export const ConsistencyParams = Type.Object({ old: Size, size: Size }, { additionalProperties: false });
export const LogRunParams = Type.Object({ run_id: Uuid }, { additionalProperties: false });

const Hashes = List(Type.String({ description: "standard base64 of a SHA-256 hash" }));
export const InclusionProofBody = Type.Object({ index: Count, size: Count, proof: Hashes });
export const ConsistencyProofBody = Type.Object({ old: Count, size: Count, proof: Hashes });
export const RunProofBody = Type.Object({
  index: Count,
  size: Count,
  proof: Hashes,
  leaf: Type.String({ description: "the logged statement: RFC 8785 JSON, the leaf's exact bytes" }),
  checkpoint: Type.String({ description: "the signed checkpoint of `size`, with the witness cosignatures the node got" }),
});
export type RunProofBody = Static<typeof RunProofBody>;
/** How far the log and its witnesses are (also in the readiness report: witnessing never makes a node unready). */
export const LogState = Type.Object({
  size: Count,
  checkpoint_size: Count,
  unlogged: Type.Integer({ minimum: 0, description: "statements whose append failed, tried again (and at the next start)" }),
  witnesses: List(
    Type.Object({
      name: Type.String(),
      size: Count,
      behind: Count,
      lag_seconds: Type.Number({ minimum: 0, description: "age of the oldest checkpoint it has not cosigned (0: it has the latest)" }),
      last_error: Type.Optional(Type.String()),
    }),
  ),
});
export const LogStatusBody = Type.Object({
  origin: Type.String(),
  vkey: Type.String({ description: "the note verifier key of the node's checkpoints" }),
  ...LogState.properties,
});
export type LogStatusBody = Static<typeof LogStatusBody>;
