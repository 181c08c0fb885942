/**
 * Shared wire building blocks of HTTP API v1. Everything under src/api is pure schema (TypeBox,
 * i.e. plain JSON Schema): the server validates with it, /openapi.json is generated from it, and
 * the client takes its types from it. Keep names stable: they are imported across the project.
 */
import { Type, type TSchema, type TArrayOptions } from "typebox";

export const DIGEST_PATTERN = "^sha256:[0-9a-f]{64}$";
export const UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
export const HEX64_PATTERN = "^[0-9a-f]{64}$";

export const Digest = Type.String({ pattern: DIGEST_PATTERN, description: '"sha256:" + 64 lowercase hex digits' });
export const Uuid = Type.String({ pattern: UUID_PATTERN, description: "a UUID" });
export const Hex64 = Type.String({ pattern: HEX64_PATTERN, description: "64 lowercase hex digits" });
/** RFC 3339 UTC timestamp. */
export const Timestamp = Type.String({ description: "RFC 3339 UTC timestamp" });
/** Any JSON value (results, journal event payloads). */
export const Json = Type.Unknown();
export const Count = Type.Integer({ minimum: 0 });

/** 204 replies: no body. */
export const NoContent = Type.Null({ description: "no content" });
/** The query of a route that takes none: a parameter sent to it is a mistake worth naming (a typo, a wrong route). */
export const NoQuery = Type.Object({}, { additionalProperties: false });

/** A blob by content address. */
export const BlobRef = Type.Object(
  { digest: Digest, byte_len: Count },
  { additionalProperties: false },
);

/** A JSON array typed readonly: replies hand out the domain's readonly lists as they are. */
export function List<T extends TSchema>(items: T, options?: TArrayOptions) {
  return Type.Immutable(Type.Array(items, options));
}
