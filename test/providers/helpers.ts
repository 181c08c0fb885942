/**
 * Test bundles for the providers tests: manifests built with the delivery module's own manifest
 * code, served by an in-memory BundleSource (the stand-in for the delivery service, which is a
 * dependency here, not the thing under test).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { sha256Digest, type Digest } from "../../src/core/digest.js";
import { NotFoundError } from "../../src/core/errors.js";
import { createManifest } from "../../src/delivery/manifest.js";
import { bundleDigestOf, compareUtf8, type BlobRef, type ComponentKind, type ComponentScope, type Manifest } from "../../src/delivery/manifest-types.js";
import type { BundleSource } from "../../src/providers/types.js";

export interface BundleFile {
  readonly path: string;
  readonly kind: ComponentKind;
  readonly scope?: ComponentScope;
  readonly content: string | Uint8Array;
}

export const PLUGIN_JSON = JSON.stringify({ name: "review-tools", description: "review tools", version: "1.0.0", author: { name: "warden" } });
export const ROOT_PLUGIN_JSON = JSON.stringify({ $schema: "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json", name: "review-tools" });
export const REVIEW_SKILL = "---\nname: review\ndescription: Review the staged changes for defects.\n---\nRead the diff, then report defects.\n";
export const LINT_SKILL = "---\nname: lint\ndescription: Lint the changed files.\n---\nRun the linter on changed files.\n";
export const CHECKLIST = "# Review checklist\n- tests\n- errors\n";
export const MCP_JSON = JSON.stringify({
  mcpServers: {
    files: { command: "files-mcp", args: ["--root", "."], env: { LOG_LEVEL: "debug", FILES_TOKEN: "${FILES_TOKEN}" } },
    web: {
      type: "http",
      url: "http://127.0.0.1:9/mcp",
      headers: { "X-Client": "warden", "X-Tenant": "${WEB_TENANT}", Authorization: "Bearer ${WEB_TOKEN}" },
    },
  },
});

/** Two skills (one with an extra file), both plugin manifests and an `.mcp.json`. */
export function fullBundleFiles(): BundleFile[] {
  return [
    { path: ".claude-plugin/plugin.json", kind: "plugin-manifest", content: PLUGIN_JSON },
    { path: ".mcp.json", kind: "mcp-declaration", content: MCP_JSON },
    { path: "plugin.json", kind: "plugin-manifest", content: ROOT_PLUGIN_JSON },
    { path: "skills/lint/SKILL.md", kind: "skill", content: LINT_SKILL },
    { path: "skills/review/SKILL.md", kind: "skill", content: REVIEW_SKILL },
    { path: "skills/review/checklist.md", kind: "skill", content: CHECKLIST },
  ];
}

export function bytesOf(content: string | Uint8Array): Uint8Array {
  return typeof content === "string" ? Buffer.from(content, "utf8") : content;
}

/** An in-memory committed catalog. `tamper` lets a test make the source serve wrong bytes. */
export class MemorySource implements BundleSource {
  readonly #manifests = new Map<string, Manifest>();
  readonly #blobs = new Map<string, Uint8Array>();
  blobReads = 0;
  tamper: ((digest: Digest, bytes: Uint8Array) => Uint8Array) | undefined;

  add(bundleId: string, revision: string, files: readonly BundleFile[]): Manifest {
    const sorted = [...files].sort((a, b) => compareUtf8(a.path, b.path));
    const contents = sorted.map((f) => ({ path: f.path, content: bytesOf(f.content) }));
    const manifest = createManifest({
      bundle_id: bundleId,
      revision,
      bundle_digest: bundleDigestOf(contents),
      components: sorted.map((f, i) => {
        const bytes = contents[i]!.content;
        const digest = sha256Digest(bytes);
        this.#blobs.set(digest, bytes);
        return { kind: f.kind, scope: f.scope ?? "session", relative_path: f.path, blob: { digest, byte_len: bytes.byteLength } };
      }),
    });
    this.#manifests.set(`${bundleId}\0${revision}`, manifest);
    return manifest;
  }

  async getManifest(bundleId: string, revision: string): Promise<Manifest> {
    const m = this.#manifests.get(`${bundleId}\0${revision}`);
    if (m === undefined) throw new NotFoundError("bundle-not-found", `no bundle ${bundleId}@${revision}`);
    return m;
  }

  async openBlob(blob: BlobRef): Promise<Uint8Array> {
    const digest = blob.digest;
    this.blobReads++;
    const bytes = this.#blobs.get(digest);
    if (bytes === undefined) throw new NotFoundError("blob-not-found", `no blob ${digest}`);
    return this.tamper ? this.tamper(digest, bytes) : bytes;
  }
}

/** Every entry under `dir` as `d <rel> <mode>` / `f <rel> <mode> <sha256>` / `l <rel>`, sorted. */
export function listTree(dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const name of fs.readdirSync(path.join(dir, rel)).sort()) {
      const r = rel === "" ? name : `${rel}/${name}`;
      const st = fs.lstatSync(path.join(dir, r));
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isSymbolicLink()) out.push(`l ${r}`);
      else if (st.isDirectory()) {
        out.push(`d ${r} ${mode}`);
        walk(r);
      } else out.push(`f ${r} ${mode} ${sha256Digest(fs.readFileSync(path.join(dir, r)))}`);
    }
  };
  walk("");
  return out;
}

/** The expected listing of a tree from `dirs` and `files` (path → content). */
export function expectedListing(dirs: readonly string[], files: Readonly<Record<string, string | Uint8Array>>): string[] {
  const lines = [
    ...dirs.map((d) => `d ${d} 700`),
    ...Object.entries(files).map(([p, c]) => `f ${p} 600 ${sha256Digest(bytesOf(c))}`),
  ];
  return lines.sort((a, b) => compareUtf8(a.slice(2), b.slice(2)));
}
