/**
 * The bundle manifest v2 data model (wire-compatible with gate4agent) and its three digests,
 * exactly as DESIGN.md "Bundle manifest" defines them. Validation lives in manifest.ts.
 */
import { createHash } from "node:crypto";
import type { Digest } from "../core/digest.js";

export const COMPONENT_KINDS = [
  "skill",
  "plugin-manifest",
  "prompt",
  "instructions",
  "agent-definition",
  "command",
  "file",
  "template",
  "mcp-declaration",
] as const;
export type ComponentKind = (typeof COMPONENT_KINDS)[number];
export const COMPONENT_SCOPES = ["workspace", "session"] as const;
export type ComponentScope = (typeof COMPONENT_SCOPES)[number];

/** Canonical wire tags: position in the lists above, counted from 1. */
export function kindTag(kind: ComponentKind): number {
  return COMPONENT_KINDS.indexOf(kind) + 1;
}
export function scopeTag(scope: ComponentScope): number {
  return COMPONENT_SCOPES.indexOf(scope) + 1;
}

export interface BlobRef {
  readonly digest: Digest;
  readonly byte_len: number;
}

export interface Component {
  readonly kind: ComponentKind;
  readonly scope: ComponentScope;
  readonly relative_path: string;
  readonly blob: BlobRef;
}

export interface Manifest {
  readonly bundle_id: string;
  readonly revision: string;
  readonly bundle_digest: Digest;
  readonly manifest_digest: Digest;
  readonly components: readonly Component[];
}

export interface CommitReceipt {
  readonly bundle_id: string;
  readonly revision: string;
  readonly bundle_digest: Digest;
  readonly manifest_digest: Digest;
  /** unique blobs, sorted by digest */
  readonly blobs: readonly BlobRef[];
  /** who signed it, when signatures came with the commit (DESIGN.md "Bundle signatures") */
  readonly signers?: readonly ReceiptSigner[];
}

/** A signer in a commit receipt: the principals the trust policy vouched for, and the key. */
export interface ReceiptSigner {
  readonly principals: readonly string[];
  readonly fingerprint: string;
  readonly key_type: string;
  readonly signed_at: string;
}

const BUNDLE_DOMAIN = "g4a-bundle-v1\0";
const MANIFEST_DOMAIN = "g4a-delivery-manifest-v2\0";

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}
function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

/**
 * Streaming bundle digest: call `file(path, byteLength)` then feed exactly that many content
 * bytes with `update`, for each file in path order; `digest()` at the end. Streaming matters
 * because a bundle may be 32 MiB and is verified at commit from the blob store.
 */
export class BundleDigestBuilder {
  readonly #hash = createHash("sha256").update(BUNDLE_DOMAIN, "latin1");
  file(relativePath: string, byteLength: number): this {
    const path = Buffer.from(relativePath, "utf8");
    this.#hash.update(u32(path.length)).update(path).update(u64(byteLength));
    return this;
  }
  update(content: Uint8Array): this {
    this.#hash.update(content);
    return this;
  }
  digest(): Digest {
    return `sha256:${this.#hash.digest("hex")}`;
  }
}

/** Bundle digest of in-memory files; `files` must already be in ascending UTF-8 byte order. */
export function bundleDigestOf(files: Iterable<{ readonly path: string; readonly content: Uint8Array }>): Digest {
  const builder = new BundleDigestBuilder();
  for (const f of files) builder.file(f.path, f.content.byteLength).update(f.content);
  return builder.digest();
}

export function manifestDigestOf(manifest: Omit<Manifest, "manifest_digest">): Digest {
  // The encoding is written into one buffer and hashed in one update: a begin digests its
  // manifest, and a hash update (and a small Buffer) per field cost more than the hashing itself.
  const { components } = manifest;
  let size = MANIFEST_DOMAIN.length + 3 * 4 + 4;
  size += Buffer.byteLength(manifest.bundle_id) + Buffer.byteLength(manifest.revision) + Buffer.byteLength(manifest.bundle_digest);
  for (const c of components) size += 2 + 4 + Buffer.byteLength(c.relative_path) + 4 + Buffer.byteLength(c.blob.digest) + 8;
  const out = Buffer.allocUnsafe(size);
  let at = out.write(MANIFEST_DOMAIN, 0, "latin1");
  const text = (value: string): void => {
    const length = out.write(value, at + 4, "utf8");
    out.writeUInt32BE(length, at);
    at += 4 + length;
  };
  text(manifest.bundle_id);
  text(manifest.revision);
  text(manifest.bundle_digest);
  at = out.writeUInt32BE(components.length, at);
  for (const c of components) {
    at = out.writeUInt8(kindTag(c.kind), at);
    at = out.writeUInt8(scopeTag(c.scope), at);
    text(c.relative_path);
    text(c.blob.digest);
    at = out.writeBigUInt64BE(BigInt(c.blob.byte_len), at);
  }
  return `sha256:${createHash("sha256").update(out).digest("hex")}`;
}

/** Compares two strings by their UTF-8 bytes (not UTF-16 code units, which JS `<` uses). */
export function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
}

/** The commit receipt of a (validated) manifest: unique blobs sorted by digest. */
export function receiptOf(manifest: Manifest): CommitReceipt {
  const byDigest = new Map<string, BlobRef>();
  for (const c of manifest.components) byDigest.set(c.blob.digest, { digest: c.blob.digest, byte_len: c.blob.byte_len });
  const blobs = [...byDigest.values()].sort((a, b) => (a.digest < b.digest ? -1 : a.digest > b.digest ? 1 : 0));
  return {
    bundle_id: manifest.bundle_id,
    revision: manifest.revision,
    bundle_digest: manifest.bundle_digest,
    manifest_digest: manifest.manifest_digest,
    blobs,
  };
}
