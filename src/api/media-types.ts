/**
 * The binary media types of HTTP API v1, apart from the schemas so that the browser's client can
 * name them without loading any.
 */

/** A chunk of one blob (PATCH /v1/stages/{stage_id}/blobs/{digest}). */
export const CHUNK_CONTENT_TYPE = "application/octet-stream";
/** A blob pack: chunks of several blobs in one body (PATCH /v1/stages/{stage_id}/blobs; DESIGN.md "Blob packs"). */
export const BLOB_PACK_CONTENT_TYPE = "application/vnd.warden.blob-pack";
