/**
 * Builders of manifests for delivery tests (shared with the stores' tests): valid manifests
 * from in-memory files, and raw wire objects that tests can break one rule at a time.
 */
import { sha256Digest, type Digest } from "../../src/core/digest.js";
import {
  bundleDigestOf,
  compareUtf8,
  manifestDigestOf,
  type ComponentKind,
  type ComponentScope,
  type Manifest,
} from "../../src/delivery/manifest-types.js";
import { inferKind } from "../../src/delivery/contract/check.js";

export interface FileSpec {
  readonly path: string;
  readonly content: string | Uint8Array;
  /** default: the kind a compiler infers from the path */
  readonly kind?: ComponentKind;
  readonly scope?: ComponentScope;
}

export interface BuiltManifest {
  readonly manifest: Manifest;
  /** blob bytes by digest */
  readonly blobs: ReadonlyMap<Digest, Uint8Array>;
}

function bytesOf(content: string | Uint8Array): Uint8Array {
  return typeof content === "string" ? new TextEncoder().encode(content) : content;
}

/** A manifest with correct digests for `files` (sorted here by UTF-8 bytes). */
export function buildManifest(files: readonly FileSpec[], bundleId = "review-tools", revision = "r1"): BuiltManifest {
  const sorted = files
    .map((f) => ({ ...f, bytes: bytesOf(f.content) }))
    .sort((a, b) => compareUtf8(a.path, b.path));
  const blobs = new Map<Digest, Uint8Array>();
  const components = sorted.map((f) => {
    const digest = sha256Digest(f.bytes);
    blobs.set(digest, f.bytes);
    return {
      kind: f.kind ?? inferKind(f.path),
      scope: f.scope ?? "session",
      relative_path: f.path,
      blob: { digest, byte_len: f.bytes.byteLength },
    } as const;
  });
  const bundle_digest = bundleDigestOf(sorted.map((f) => ({ path: f.path, content: f.bytes })));
  const body = { bundle_id: bundleId, revision, bundle_digest, components };
  return { manifest: { ...body, manifest_digest: manifestDigestOf(body) }, blobs };
}

/** A deep, mutable copy of a manifest as JSON would carry it. */
type RawComponent = Record<string, unknown> & { blob: Record<string, unknown> };
export type RawManifest = Record<string, unknown> & { components: RawComponent[] };
export function rawOf(manifest: Manifest): RawManifest {
  return JSON.parse(JSON.stringify(manifest)) as RawManifest;
}

/**
 * Recomputes `manifest_digest` of a raw (possibly broken) manifest, so a test isolates the one
 * rule it breaks instead of tripping the digest check.
 */
export function redigest(raw: RawManifest): RawManifest {
  try {
    raw.manifest_digest = manifestDigestOf(raw as unknown as Omit<Manifest, "manifest_digest">);
  } catch {
    // Not encodable (e.g. a byte_len that is no integer): the rule under test fires first anyway.
  }
  return raw;
}

/** A digest-shaped string that is not the digest of anything in particular. */
export function fakeDigest(seed: number | string): Digest {
  return sha256Digest(`fake-${seed}`);
}

/** A raw manifest of `paths` (kept in the given order), each a file of `byteLen` bytes. */
export function rawWithPaths(paths: readonly string[], byteLen = 7): RawManifest {
  const raw = {
    bundle_id: "review-tools",
    revision: "r1",
    bundle_digest: fakeDigest("bundle"),
    manifest_digest: fakeDigest("manifest"),
    components: paths.map((p, i) => ({
      kind: "file",
      scope: "session",
      relative_path: p,
      blob: { digest: fakeDigest(i), byte_len: byteLen },
    })),
  };
  return redigest(raw as unknown as RawManifest);
}

/** The `review-tools` bundle of gate4agent's tests, with an `.mcp.json` and a second skill. */
export function reviewToolsFiles(): FileSpec[] {
  return [
    { path: ".claude-plugin/plugin.json", content: '{"name":"review-tools","description":"review tools","version":"1.0.0"}' },
    { path: "plugin.json", content: '{"$schema":"https://agent-plugins.org/schemas/1.0.0/plugin.schema.json","name":"review-tools"}' },
    { path: ".mcp.json", content: '{"mcpServers":{"review":{"command":"review-mcp-server"},"docs":{"type":"http","url":"https://docs.example.com/mcp"}}}' },
    { path: "skills/review/SKILL.md", content: "---\nname: review\ndescription: review changes\n---\nReview.\n" },
    { path: "skills/review/references/checklist.md", content: "# Checklist\n" },
    { path: "skills/summarize/SKILL.md", content: "---\nname: summarize\ndescription: Summarize a change.\n---\nSummarize.\n" },
    { path: "README.md", content: "Review tools.\n" },
  ];
}
