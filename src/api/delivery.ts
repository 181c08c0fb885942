/** Delivery routes: stages, chunk upload, commit, bundles, materializations. */
import { Type, type Static } from "typebox";
import { COMPONENT_KINDS, COMPONENT_SCOPES } from "../delivery/manifest-types.js";
import { PROVIDER_NAMES } from "../providers/types.js";
import { BlobRef, Count, Digest, List, Timestamp, Uuid } from "./common.js";

export const Component = Type.Object(
  {
    kind: Type.Enum(COMPONENT_KINDS),
    scope: Type.Enum(COMPONENT_SCOPES),
    relative_path: Type.String(),
    blob: BlobRef,
  },
  { additionalProperties: false },
);
export type Component = Static<typeof Component>;

/**
 * Bundle manifest v2 (DESIGN.md "Bundle manifest"). The route checks every rule of it (paths,
 * order, digests, limits, contract) with the delivery module's own parser, which names each
 * broken rule with its own `manifest-*` code.
 */
export const Manifest = Type.Object(
  {
    bundle_id: Type.String(),
    revision: Type.String(),
    bundle_digest: Digest,
    manifest_digest: Digest,
    components: List(Component),
  },
  { additionalProperties: false },
);
export type Manifest = Static<typeof Manifest>;

/** A bundle signer (DESIGN.md "Bundle signatures"): principals the trust policy vouched for, the key's `SHA256:` fingerprint. */
export const SignerView = Type.Object({
  principals: List(Type.String()),
  fingerprint: Type.String(),
  key_type: Type.String(),
  signed_at: Timestamp,
  /** the armored SSHSIG (in catalog views): check it with `ssh-keygen -Y verify -n warden-bundle` */
  signature: Type.Optional(Type.String()),
});
export type SignerView = Static<typeof SignerView>;

export const CommitReceipt = Type.Object({
  bundle_id: Type.String(),
  revision: Type.String(),
  bundle_digest: Digest,
  manifest_digest: Digest,
  blobs: List(BlobRef),
  /** present when signatures came with the commit */
  signers: Type.Optional(List(SignerView)),
});
export type CommitReceipt = Static<typeof CommitReceipt>;

export const MissingBlob = Type.Object({ digest: Digest, byte_len: Count, offset: Count });
export type MissingBlob = Static<typeof MissingBlob>;

/**
 * The most bytes one chunk or blob pack request body may hold on this node (its `limits.chunkBytes`):
 * a client sizes its requests within it from the first, instead of learning it from a `413
 * chunk-too-large`.
 */
export const ChunkBytes = Type.Integer({ minimum: 1, description: "the most bytes one chunk or blob pack request body may hold (the node's limits.chunkBytes)" });

/** 201: a stage to upload into (new or resumed). */
export const StageBegun = Type.Object({
  stage_id: Type.String(),
  manifest_digest: Digest,
  missing: List(MissingBlob),
  chunk_bytes: ChunkBytes,
});
export type StageBegun = Static<typeof StageBegun>;

/** 200: the manifest is already committed. */
export const StageCommitted = Type.Object({
  stage_id: Type.String(),
  manifest_digest: Digest,
  committed: Type.Literal(true),
  receipt: CommitReceipt,
  missing: List(MissingBlob, { maxItems: 0 }),
  chunk_bytes: ChunkBytes,
});
export type StageCommitted = Static<typeof StageCommitted>;

export const StageStatus = Type.Object({
  stage_id: Type.String(),
  manifest_digest: Digest,
  missing: List(MissingBlob),
  committed: Type.Optional(Type.Literal(true)),
  receipt: Type.Optional(CommitReceipt),
});
export type StageStatus = Static<typeof StageStatus>;

/** A stage being uploaded, and how far it got (`GET /v1/stages`). */
export const UploadProgress = Type.Object({
  stage_id: Type.String(),
  manifest_digest: Digest,
  bundle_id: Type.String(),
  revision: Type.String(),
  created_at: Timestamp,
  last_active_at: Timestamp,
  /** blobs the stage receives: those the node lacked when it began */
  blobs: Count,
  blobs_received: Count,
  /** the bytes of those blobs, as the manifest declares them */
  bytes_declared: Count,
  bytes_received: Count,
});
export type UploadProgress = Static<typeof UploadProgress>;
export const UploadList = Type.Object({ stages: List(UploadProgress) });
export type UploadList = Static<typeof UploadList>;

export const CommitReply = Type.Object({ receipt: CommitReceipt });

/** Largest armored signature, and most signatures at once (signing-errors.ts). */
const ArmoredSignature = Type.String({ minLength: 1, maxLength: 64 * 1024, description: "armored SSHSIG (ssh-keygen -Y sign, namespace warden-bundle)" });

/** Optional body of a commit: the publisher's signatures over the revision's statement. */
export const CommitBody = Type.Object({ signatures: Type.Optional(List(ArmoredSignature, { maxItems: 16 })) }, { additionalProperties: false });
export type CommitBody = Static<typeof CommitBody>;

export const SignatureBody = Type.Object({ signature: ArmoredSignature }, { additionalProperties: false });
export type SignatureBody = Static<typeof SignatureBody>;
export type CommitReply = Static<typeof CommitReply>;

const StageId = Type.String({ pattern: "^[0-9a-f]{32}$", description: "32 lowercase hex digits" });

export const StageParams = Type.Object({ stage_id: StageId }, { additionalProperties: false });
export type StageParams = Static<typeof StageParams>;

export const ChunkParams = Type.Object(
  { stage_id: StageId, digest: Digest },
  { additionalProperties: false },
);
export type ChunkParams = Static<typeof ChunkParams>;

export const UPLOAD_OFFSET_HEADER = "upload-offset";
export { BLOB_PACK_CONTENT_TYPE, CHUNK_CONTENT_TYPE } from "./media-types.js";

export const ChunkHeaders = Type.Object({
  // At most 15 digits: every such offset is a safe integer, so this pattern is the one check an
  // offset gets over HTTP (no blob comes near 10^15 bytes).
  "upload-offset": Type.String({ pattern: "^(0|[1-9][0-9]{0,14})$", description: "byte offset of this chunk in the blob" }),
});
export type ChunkHeaders = Static<typeof ChunkHeaders>;

export const RevisionView = Type.Object({
  revision: Type.String(),
  manifest_digest: Digest,
  committed_at: Timestamp,
  retired: Type.Boolean(),
  retired_at: Type.Optional(Timestamp),
  receipt: CommitReceipt,
  /** every signature the revision carries, those added after the commit too */
  signatures: List(SignerView),
});
export type RevisionView = Static<typeof RevisionView>;

export const BundleView = Type.Object({ bundle_id: Type.String(), revisions: List(RevisionView) });
export type BundleView = Static<typeof BundleView>;

export const BundleList = Type.Object({ bundles: List(BundleView) });
export type BundleList = Static<typeof BundleList>;

/**
 * A bundle id or revision in a URL: what a manifest may name (DESIGN.md "Bundle manifest"), 1–128
 * bytes of printable ASCII without a space, '/' or '\', so that one a manifest could never
 * carry is refused as malformed (`bundle-id-invalid`, `revision-invalid`), not looked up.
 */
const UrlIdentifier = Type.String({ pattern: "^[!-.0-\\[\\]-~]{1,128}$", description: "1–128 bytes of printable ASCII without a space, '/' or '\\'" });

export const BundleParams = Type.Object({ bundle_id: UrlIdentifier }, { additionalProperties: false });
export type BundleParams = Static<typeof BundleParams>;

export const RevisionParams = Type.Object({ bundle_id: UrlIdentifier, revision: UrlIdentifier }, { additionalProperties: false });
export type RevisionParams = Static<typeof RevisionParams>;

export const ProviderName = Type.Enum(PROVIDER_NAMES);
export type ProviderName = Static<typeof ProviderName>;

export const MaterializationBody = Type.Object({ provider: ProviderName }, { additionalProperties: false });
export type MaterializationBody = Static<typeof MaterializationBody>;

export const MaterializationReply = Type.Object({
  session: Type.String(),
  root: Type.String(),
  args: List(Type.String()),
  env: Type.Record(Type.String(), Type.String()),
});
export type MaterializationReply = Static<typeof MaterializationReply>;

/** What the materializer would do with a revision for each provider (GET …/providers): the same planning a run does, nothing written. */
export const ProviderPlans = Type.Object({
  providers: List(
    Type.Union([
      Type.Object({
        provider: ProviderName,
        materializes: Type.Literal(true),
        files: List(
          Type.Union([
            Type.Object({ target: Type.String({ description: "where the file lands, relative to the session directory" }), path: Type.String({ description: "the bundle path it is copied from" }) }),
            Type.Object({ target: Type.String(), generated: Type.Literal(true, { description: "written by warden (codex config.toml)" }) }),
          ]),
        ),
      }),
      Type.Object({ provider: ProviderName, materializes: Type.Literal(false), code: Type.String({ description: "the refusal's stable code" }), detail: Type.String() }),
    ]),
  ),
});
export type ProviderPlans = Static<typeof ProviderPlans>;

export const RetirementReply = Type.Object({
  bundle_id: Type.String(),
  revision: Type.String(),
  retired: Type.Literal(true),
  /** blobs that no live revision or open stage referenced any more, deleted from the store */
  collected_blobs: Count,
});
export type RetirementReply = Static<typeof RetirementReply>;

export const MaterializationParams = Type.Object({ session: Uuid }, { additionalProperties: false });
export type MaterializationParams = Static<typeof MaterializationParams>;
