/**
 * Client side of delivery: compile a directory into a manifest and the list of files to upload
 * (DESIGN.md "Bundle manifest", "Bundle contract"; CLI `warden push`). The result has passed the
 * same validation a node applies (parseManifest and both contract halves), so a push never
 * uploads a byte of a bundle the node would refuse.
 */
import * as fsp from "node:fs/promises";
import * as nodePath from "node:path";
import { ValidationError, errnoCode } from "../../core/errors.js";
import type { Digest } from "../../core/digest.js";
import { sharedOffThreadHasher, type OffThreadHasher } from "../../core/off-thread-hash.js";
import { DEFAULT_LIMITS, type Limits } from "../../core/limits.js";
import {
  BundleDigestBuilder,
  COMPONENT_KINDS,
  COMPONENT_SCOPES,
  compareUtf8,
  type Component,
  type ComponentKind,
  type ComponentScope,
} from "../manifest-types.js";
import { createManifest, validateBundleIdentifier } from "../manifest.js";
import type { Manifest } from "../manifest-types.js";
import { validateRelativePath } from "../paths.js";
import { checkContractAtBegin, checkContractContent, inferKind } from "../contract/check.js";
import { walkDirectory, sourceError, sourceRefusal, type WalkedFile } from "./walk.js";
import { readStable, readVerified } from "./read.js";
import type { BundleEntry, DigestCache } from "./digest-cache.js";
import type { SlabCache } from "./slab-cache.js";

export interface CompiledFile {
  readonly component: Component;
  readonly absolutePath: string;
}

export interface CompiledBundle {
  readonly manifest: Manifest;
  /** one entry per component, in manifest order */
  readonly files: readonly CompiledFile[];
  /** `.git` / `node_modules` entries left out (relative paths), for the CLI to mention */
  readonly skipped: readonly string[];
  /**
   * the validated bytes by relative path, when `keepContents` was set (a push uploads exactly
   * these): views on one SharedArrayBuffer, which a WHATWG fetch refuses as a body (copy first)
   */
  readonly contents?: ReadonlyMap<string, Uint8Array>;
  /**
   * the memory `contents` are views on, when they came from `slabs`: whoever holds the last view
   * gives it back (SlabCache.give) once nothing reads or writes through one
   */
  readonly slab?: SharedArrayBuffer;
}

export interface SourceFile {
  readonly relativePath: string;
  readonly absolutePath: string;
}

export interface CompileHooks {
  /** Called for each file after its descriptor is checked and before it is read (test seam). */
  readonly beforeRead?: (file: SourceFile) => void | Promise<void>;
}

export interface CompileOptions {
  readonly bundleId: string;
  readonly revision: string;
  /** kind per relative path, overriding the inferred one; every key must name a compiled file */
  readonly kinds?: Readonly<Record<string, ComponentKind>>;
  /** scope of every component (default `session`) */
  readonly scope?: ComponentScope;
  readonly limits?: Limits;
  readonly hooks?: CompileHooks;
  /** keep the bytes that were read, digested and validated (saves re-reading them for upload) */
  readonly keepContents?: boolean;
  /** digests of earlier compiles, reused for files whose identity is unchanged (compile/digest-cache.ts) */
  readonly digestCache?: DigestCache;
  /** where blob digests are taken (default the process-wide one, core/off-thread-hash.ts) */
  readonly hasher?: OffThreadHasher;
  /**
   * where the memory the files are read into comes from (compile/slab-cache.ts; default a new slab
   * for each compile); a compile that keeps no contents gives it back when it succeeds
   */
  readonly slabs?: SlabCache;
}

function checkOptions(options: CompileOptions): void {
  validateBundleIdentifier(options.bundleId, "bundle_id");
  validateBundleIdentifier(options.revision, "revision");
  if (options.scope !== undefined && !COMPONENT_SCOPES.includes(options.scope)) {
    const rule = `unknown scope ${JSON.stringify(options.scope)}`;
    throw new ValidationError("manifest-scope-unknown", rule, { details: { field: "scope" } });
  }
  for (const [path, kind] of Object.entries(options.kinds ?? {})) {
    validateRelativePath(path);
    if (!COMPONENT_KINDS.includes(kind)) {
      throw sourceRefusal("manifest-kind-unknown", path, `unknown kind ${JSON.stringify(kind)}`, { field: "kind" });
    }
  }
}

async function resolveRoot(dir: string): Promise<string> {
  // The root is followed as the user named it (it may legitimately sit behind a symlink, as
  // macOS's /tmp does); nothing below it is ever followed.
  let root: string;
  let isDirectory: boolean;
  try {
    root = await fsp.realpath(nodePath.resolve(dir));
    isDirectory = (await fsp.stat(root)).isDirectory();
  } catch (error) {
    if (errnoCode(error) === "ENOENT") {
      throw sourceRefusal("compile-root-missing", dir, "does not exist");
    }
    throw sourceError(error, dir);
  }
  if (!isDirectory) {
    throw sourceRefusal("compile-root-not-directory", dir, "is not a directory");
  }
  return root;
}

function checkOverridesExist(overrides: ReadonlyMap<string, ComponentKind>, files: readonly WalkedFile[]): void {
  const known = new Set(files.map((f) => f.relativePath));
  for (const path of overrides.keys()) {
    if (!known.has(path)) {
      const rule = "options.kinds names a path that is not a file of the bundle";
      throw sourceRefusal("compile-kind-override-unknown-path", path, rule, { field: "kind" });
    }
  }
}

/**
 * One slot per file in one SharedArrayBuffer: the file's walked size and the spare byte readStable
 * reads into to see a file that grew. A read never writes past its slot, so a file that grew (and
 * is refused) leaves its neighbours' bytes as they were.
 */
function slotsOf(files: readonly WalkedFile[], slab: SharedArrayBuffer): Uint8Array[] {
  let at = 0;
  return files.map((f) => {
    const slot = new Uint8Array(slab, at, Number(f.stat.size) + 1);
    at += slot.byteLength;
    return slot;
  });
}

/** Bytes of the slab slotsOf lays `files` out in. */
function slabBytes(files: readonly WalkedFile[]): number {
  return files.reduce((sum, f) => sum + Number(f.stat.size) + 1, 0);
}

interface ReadBundle {
  readonly compiled: CompiledFile[];
  readonly contents: Map<string, Uint8Array>;
  readonly bundleDigest: Digest;
}

/**
 * Files read ahead of the one being digested: the reads run on libuv's I/O threads (four by
 * default) while this thread digests, so there are always bytes waiting for it.
 */
const READ_AHEAD = 4;

/**
 * Reads every walked file once, in manifest order, and digests it twice: the bundle digest (one
 * hash over all files in path order) on this thread, each blob's own digest on the off-thread
 * hasher's worker. So the two passes run at once on two cores, file i's blob digest beside file
 * i+1's bundle update, while the next reads run on the I/O threads. (WebCrypto's digest, also off
 * this thread, copied its input, then wiped and freed the copy, which cost more CPU than it saved:
 * issue 34.) The files are read into one slab of shared memory (slotsOf), which the worker hashes
 * in place and the contents are views on: one allocation per compile, where a buffer per file,
 * transferred to the worker and back, set off about one full garbage collection per 32 MiB.
 * With a digest cache, a file whose identity is unchanged since an earlier compile is read (its
 * bytes are validated and uploaded) but not hashed; when all are, neither is the bundle.
 */
async function readFiles(
  files: readonly WalkedFile[],
  kindOf: (path: string) => ComponentKind,
  scope: ComponentScope,
  slab: SharedArrayBuffer,
  options: Pick<CompileOptions, "hooks" | "digestCache" | "hasher">,
): Promise<ReadBundle> {
  const { hooks = {}, digestCache: cache } = options;
  const hasher = options.hasher ?? sharedOffThreadHasher();
  const readStartNs = cache?.now() ?? 0n;
  const cached = files.map((f) => cache?.lookup(f.absolutePath, f.stat));
  // The bundle digest of an unchanged listing is known; otherwise it is taken over the bytes.
  const knownBundle = cached.every((d) => d !== undefined)
    ? cache?.bundleDigest(files.map((f, i) => ({ relativePath: f.relativePath, byteLength: Number(f.stat.size), digest: cached[i]! })))
    : undefined;
  hasher.expect(files.reduce((sum, f, i) => (cached[i] === undefined ? sum + Number(f.stat.size) : sum), 0));
  const bundleDigest = new BundleDigestBuilder();
  const slots = slotsOf(files, slab);
  const read = (f: WalkedFile, i: number): Promise<Buffer> => {
    const hook = hooks.beforeRead;
    const reading = readStable(f.absolutePath, f.relativePath, f.stat, {
      beforeRead: hook && (() => hook({ relativePath: f.relativePath, absolutePath: f.absolutePath })),
      into: slots[i]!,
    });
    reading.catch(() => undefined); // awaited in turn; a failure ahead must not go unhandled
    return reading;
  };
  const reads = files.slice(0, READ_AHEAD).map(read);
  const hashed: Promise<Digest>[] = [];
  const contents = new Map<string, Uint8Array>();
  for (const [i, f] of files.entries()) {
    const bytes = await reads[i]!;
    if (i + READ_AHEAD < files.length) reads.push(read(files[i + READ_AHEAD]!, i + READ_AHEAD));
    contents.set(f.relativePath, bytes);
    // readStable refused the file unless it kept the walked identity through the read.
    if (knownBundle === undefined) bundleDigest.file(f.relativePath, bytes.byteLength).update(bytes);
    const known = cached[i];
    const digesting = known === undefined ? hasher.digest(bytes) : Promise.resolve(known);
    digesting.catch(() => undefined); // awaited below, after the reads; a failure must not go unhandled first
    hashed.push(digesting);
  }
  const done = await Promise.all(hashed);
  const compiled: CompiledFile[] = [];
  const listing: BundleEntry[] = [];
  for (const [i, f] of files.entries()) {
    const blob = { digest: done[i]!, byte_len: Number(f.stat.size) };
    const component = { kind: kindOf(f.relativePath), scope, relative_path: f.relativePath, blob };
    compiled.push({ component, absolutePath: f.absolutePath });
    listing.push({ relativePath: f.relativePath, byteLength: blob.byte_len, digest: blob.digest });
    if (cached[i] === undefined) cache?.remember(f.absolutePath, f.stat, blob.digest, readStartNs);
  }
  const digest = knownBundle ?? bundleDigest.digest();
  if (knownBundle === undefined) cache?.rememberBundle(listing, digest);
  return { compiled, contents, bundleDigest: digest };
}

/**
 * Compiles `dir` into a bundle: kinds inferred from paths (overridable), scope `session` by
 * default, components sorted by UTF-8 bytes, digests computed, and the result validated by
 * parseManifest and both contract checks before it is returned.
 */
export async function compileDirectory(dir: string, options: CompileOptions): Promise<CompiledBundle> {
  checkOptions(options);
  const limits = options.limits ?? DEFAULT_LIMITS;
  const walked = await walkDirectory(await resolveRoot(dir), limits);
  if (walked.files.length === 0) {
    throw sourceRefusal("compile-empty-directory", dir, "holds no files to deliver");
  }
  const files = walked.files.slice().sort((a, b) => compareUtf8(a.relativePath, b.relativePath));
  const overrides = new Map(Object.entries(options.kinds ?? {}));
  checkOverridesExist(overrides, files);
  const kindOf = (path: string): ComponentKind => overrides.get(path) ?? inferKind(path);
  const scope = options.scope ?? "session";
  // Taken from the cache only here, after every check that needs no bytes: a compile refused
  // before any read leaves the kept slab kept. One refused after (its reads ahead may still be
  // landing in the slab) never gives it back.
  const bytes = slabBytes(files);
  const slab = options.slabs?.take(bytes) ?? new SharedArrayBuffer(bytes);
  const { compiled, contents, bundleDigest } = await readFiles(files, kindOf, scope, slab, options);

  const components = compiled.map((c) => c.component);
  const { bundleId: bundle_id, revision } = options;
  // createManifest validates the body with parseManifest's own rules (parseBody); the body holds
  // only strings, integers, arrays and plain objects, whose JSON round trip is the identity, so a
  // second pass through the wire form checked nothing more and cost a parse and a digest (issue 34).
  const manifest = createManifest({ bundle_id, revision, bundle_digest: bundleDigest, components }, limits);
  checkContractAtBegin(manifest);
  await checkContractContent(manifest, async (c) => contents.get(c.relative_path)!);
  const kept = options.keepContents === true;
  // Every read and digest has ended: with no contents handed out, nothing else holds a view.
  if (!kept) options.slabs?.give(slab);
  return {
    manifest,
    files: manifest.components.map((component, i) => ({ component, absolutePath: compiled[i]!.absolutePath })),
    skipped: walked.skipped,
    ...(kept ? { contents, ...(options.slabs !== undefined ? { slab } : {}) } : {}),
  };
}

/** Re-reads a compiled file for upload; refuses it if its length or digest changed since. */
export function readCompiledFile(file: CompiledFile): Promise<Uint8Array> {
  const { relative_path, blob } = file.component;
  return readVerified(file.absolutePath, relative_path, blob.digest, blob.byte_len);
}
