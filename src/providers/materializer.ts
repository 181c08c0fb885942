/**
 * Materializes a committed bundle revision for one provider session (DESIGN.md "Providers"):
 * private (0700/0600), atomic (built in a temp directory, then renamed into
 * `<root>/<session>/`), verified byte for byte as it is copied, re-validated before launch and
 * removed on cleanup.
 *
 * Order of work, so a refusal never leaves anything behind: binding rules and the Codex MCP
 * translation are decided first (reading at most the `.mcp.json` blob into memory); only then is
 * anything created on disk.
 */
import * as fsp from "node:fs/promises";
import * as fs from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { DEFAULT_LIMITS, type Limits } from "../core/limits.js";
import { IntegrityError, NotFoundError, ValidationError, errnoCode, isStorageFull, storageFull } from "../core/errors.js";
import { sha256Digest } from "../core/digest.js";
import { ensurePrivateDirSync, syncDir, TEMP_PREFIX } from "../storage/secure-fs.js";
import { parseManifest } from "../delivery/manifest.js";
import type { Component, Manifest } from "../delivery/manifest-types.js";
import { BUNDLE_DIR, HOME_DIR, planTree, plannedDirs, type TreePlan } from "./binding.js";
import { codexConfigToml } from "./codex-config.js";
import { expandBundleLaunch, resolveProfiles, type ProviderProfiles } from "./profiles.js";
import { auditTree, TREE_DIR_MODE, TREE_FILE_MODE } from "./tree-audit.js";
import { removeTree } from "../storage/tree-remove.js";
import { TreeWriter } from "./tree-write.js";
import { LOCK_PREFIX, SessionLocks, isSessionName, sessionExists, validateSessionName } from "./sessions.js";
import {
  isProviderName,
  type BundleRef,
  type BundleSigner,
  type BundleSource,
  type ExpectedFile,
  type ExpectedTree,
  type Materialization,
  type ProviderName,
} from "./types.js";

export interface MaterializerHooks {
  /** Called with the fully written temp directory just before it is renamed into place. */
  beforePublish?(tempDir: string): void | Promise<void>;
}

export interface MaterializerOptions {
  /** the materializations root (created private if missing) */
  readonly root: string;
  readonly source: BundleSource;
  readonly profiles?: ProviderProfiles;
  readonly limits?: Limits;
  readonly hooks?: MaterializerHooks;
}

export interface MaterializeRequest {
  readonly provider: ProviderName;
  /** none: only what warden generates for the provider (a codex run's CODEX_HOME) */
  readonly bundle?: BundleRef;
  readonly session: string;
}

/** A planned file with the bytes decided before writing (generated files) or to fetch (blobs). */
interface FileJob {
  readonly target: string;
  readonly expected: ExpectedFile;
  readonly component?: Component;
  readonly content?: Uint8Array;
}

/** One file of a planned session tree: where it lands, and the bundle path it is copied from (none when warden generates it). */
export type PlannedTreeFile = { readonly target: string; readonly path: string } | { readonly target: string; readonly generated: true };

/** Whether a run of `provider` without a bundle still needs a tree of its own. */
export function needsTreeWithoutBundle(provider: ProviderName): boolean {
  // Codex reads its model provider and settings from CODEX_HOME/config.toml: a run without a
  // bundle would otherwise fall back to the node user's ~/.codex.
  return provider === "codex";
}

export class Materializer {
  readonly root: string;
  readonly #source: BundleSource;
  readonly #profiles: ProviderProfiles;
  readonly #limits: Limits;
  readonly #hooks: MaterializerHooks;
  /** What each live session must hold; revalidation compares the disk against this. */
  readonly #live = new Map<string, { expected: ExpectedTree; materialization: Materialization }>();
  readonly #sessions: SessionLocks;

  constructor(options: MaterializerOptions) {
    this.root = options.root;
    this.#source = options.source;
    this.#profiles = options.profiles ?? resolveProfiles();
    this.#limits = options.limits ?? DEFAULT_LIMITS;
    this.#hooks = options.hooks ?? {};
    this.#sessions = new SessionLocks(this.root);
    ensurePrivateDirSync(this.root, { create: true, recursive: true });
  }

  /**
   * Every refusal `materialize` could answer from the bundle and the provider (binding rules, the
   * Codex MCP translation, path conflicts), without writing anything: a caller checks a request
   * with this before it claims an invocation id for it.
   */
  /**
   * Everything `materialize` would refuse, checked without writing anything (a run checks it
   * before its claim). Answers the revision's signers.
   */
  async check(provider: ProviderName, bundle: BundleRef): Promise<readonly BundleSigner[]> {
    await this.#prepare(provider, bundle);
    return (await this.#source.signersOf?.(bundle.bundle_id, bundle.revision)) ?? [];
  }

  /**
   * What `materialize` would build for `provider` from a committed revision, decided by the same
   * code (binding rules, the Codex MCP translation, path conflicts) without writing anything:
   * each file's place in the session tree and the bundle path it comes from (none: generated).
   * Throws what `materialize` would refuse.
   */
  async plan(provider: ProviderName, bundle: BundleRef): Promise<readonly PlannedTreeFile[]> {
    const { jobs } = await this.#prepare(provider, bundle);
    return jobs.map((j) => Object.freeze(j.component === undefined ? { target: j.target, generated: true as const } : { target: j.target, path: j.component.relative_path }));
  }

  /** Builds `<root>/<session>/` for `provider` from a committed bundle revision. */
  async materialize(request: MaterializeRequest): Promise<Materialization> {
    const session = validateSessionName(request.session);
    const provider = request.provider;
    const { manifest, dirs, jobs } = await this.#prepare(provider, request.bundle);
    const finalDir = join(this.root, session);
    // The lock comes first: whoever sees the session directory also sees its owner's lock.
    this.#sessions.acquire(session);
    try {
      await this.#reserve(finalDir, session);
    } catch (error) {
      await this.#sessions.release(session);
      throw error;
    }
    const temp = join(this.root, `${TEMP_PREFIX}${session}.${randomBytes(6).toString("hex")}`);
    let tree: TreeWriter | undefined;
    let published = false;
    try {
      await fsp.mkdir(temp, { mode: TREE_DIR_MODE });
      tree = await TreeWriter.open(temp);
      await this.#write(tree, dirs, jobs);
      await this.#hooks.beforePublish?.(temp);
      // Only a tree still where it was built is published: a directory moved or swapped for a
      // symlink meanwhile would put a link in the session, or leave the bytes elsewhere.
      tree.checkInPlace();
      // The reservation is an empty directory we created: rename(2) replaces it atomically, and
      // fails (ENOTEMPTY) if anything was put into it meanwhile.
      await fsp.rename(temp, finalDir);
      published = true;
      tree.checkInPlace(finalDir);
      await syncDir(this.root);
    } catch (error) {
      await tree?.close();
      await removeTree(published ? finalDir : temp).catch(() => undefined);
      await fsp.rmdir(finalDir).catch(() => undefined);
      await this.#sessions.release(session);
      // A full disk is exhausted capacity (507), not an internal error: a run then ends as a clean,
      // recorded "not launched" failure instead of an unresolved claim an operator must close.
      throw isStorageFull(error) ? storageFull("materialize the bundle", error) : error;
    }
    await tree.close();
    const paths = {
      root: finalDir,
      bundle: join(finalDir, BUNDLE_DIR),
      home: join(finalDir, HOME_DIR),
      skills: join(finalDir, BUNDLE_DIR, "skills"),
    };
    const launch = expandBundleLaunch(this.#profiles[provider], paths);
    const materialization: Materialization = Object.freeze({
      session,
      provider,
      root: finalDir,
      args: Object.freeze(launch.args),
      env: Object.freeze(launch.env),
      ...(manifest === undefined
        ? {}
        : { bundle: Object.freeze({ bundle_id: manifest.bundle_id, revision: manifest.revision, manifest_digest: manifest.manifest_digest }) }),
      files: jobs.length,
    });
    const files = new Map(jobs.map((j) => [j.target, j.expected] as const));
    this.#live.set(session, { expected: { dirs, files }, materialization });
    return materialization;
  }

  /**
   * Re-checks the exact file set, bytes and modes of a session this materializer built. Throws an
   * IntegrityError naming the drift; the caller must then not launch.
   */
  async revalidate(session: string): Promise<Materialization> {
    validateSessionName(session);
    const live = this.#live.get(session);
    if (live === undefined) {
      throw new NotFoundError("materialization-unknown", `no materialization ${JSON.stringify(session)} was built by this process`, {
        details: { session },
      });
    }
    await auditTree(join(this.root, session), live.expected);
    return live.materialization;
  }

  /** Removes `<root>/<session>` without following links. Idempotent. */
  async cleanup(session: string): Promise<void> {
    validateSessionName(session);
    this.#live.delete(session);
    await removeTree(join(this.root, session));
    await this.#sessions.release(session);
    await syncDir(this.root);
  }

  /**
   * Removes what dead processes left: temp directories of interrupted materializations, and
   * session trees whose owner's lock is free (its process died before cleanup). Trees of live
   * sessions, in this process or another, are left alone. Call at start-up; temp directories of
   * this process's in-flight materializations would be removed too.
   */
  async sweep(): Promise<{ temps: number; stale: number }> {
    let temps = 0;
    let stale = 0;
    for (const name of await fsp.readdir(this.root)) {
      if (name.startsWith(TEMP_PREFIX)) {
        await removeTree(join(this.root, name));
        temps++;
      } else if (isSessionName(name)) {
        if (await this.#sessions.withOrphan(name, () => removeTree(join(this.root, name)))) stale++;
      } else if (name.startsWith(LOCK_PREFIX)) {
        // A lock file whose tree is already gone (a crash between removing the two).
        const session = name.slice(LOCK_PREFIX.length);
        if (isSessionName(session) && !fs.existsSync(join(this.root, session))) await this.#sessions.withOrphan(session, async () => undefined);
      }
    }
    if (temps + stale > 0) await syncDir(this.root);
    return { temps, stale };
  }

  async #prepare(provider: ProviderName, bundle: BundleRef | undefined): Promise<{ manifest: Manifest | undefined; dirs: string[]; jobs: FileJob[] }> {
    if (!isProviderName(provider)) {
      throw new ValidationError("provider-unknown", `unknown provider ${JSON.stringify(provider)}`, { details: { provider: String(provider) } });
    }
    const manifest = bundle === undefined ? undefined : await this.#committedManifest(bundle);
    const plan = planTree(provider, manifest);
    const jobs = await this.#jobs(plan, manifest);
    const dirs = plannedDirs(plan);
    for (const d of dirs) {
      if (jobs.some((j) => j.target === d)) {
        throw new ValidationError("materialize-path-conflict", `${JSON.stringify(d)} would be both a file and a directory`, {
          details: { path: d, provider },
          status: 422,
        });
      }
    }
    return { manifest, dirs, jobs };
  }

  async #committedManifest(bundle: BundleRef): Promise<Manifest> {
    const raw = await this.#source.getManifest(bundle.bundle_id, bundle.revision);
    // Re-validated here too: the manifest decides paths on disk, so every path rule and the
    // manifest digest are checked by the layer that writes, not only by the one that stored it.
    const manifest = parseManifest(JSON.parse(JSON.stringify(raw)) as unknown, this.#limits);
    if (manifest.bundle_id !== bundle.bundle_id || manifest.revision !== bundle.revision) {
      throw new IntegrityError("materialize-manifest-mismatch", "the bundle source answered with another bundle revision", {
        details: { bundle_id: bundle.bundle_id, revision: bundle.revision },
        status: 500,
      });
    }
    return manifest;
  }

  async #jobs(plan: TreePlan, manifest: Manifest | undefined): Promise<FileJob[]> {
    const jobs: FileJob[] = [];
    for (const f of plan.files) {
      if (f.from === "blob") {
        const component = (manifest as Manifest).components[f.component] as Component;
        jobs.push({ target: f.target, expected: component.blob, component });
        continue;
      }
      const mcp = f.component === undefined ? undefined : ((manifest as Manifest).components[f.component] as Component);
      const model = this.#profiles[plan.provider].model;
      const text = codexConfigToml({
        ...(model === undefined ? {} : { model }),
        ...(mcp === undefined || f.component === undefined ? {} : { mcpJson: { bytes: await this.#verifiedBlob(mcp), component: f.component } }),
      });
      const toml = Buffer.from(text, "utf8");
      jobs.push({ target: f.target, expected: { digest: sha256Digest(toml), byte_len: toml.byteLength }, content: toml });
    }
    return jobs;
  }

  /** The component's bytes, re-verified against its digest and length (G8). */
  async #verifiedBlob(component: Component): Promise<Uint8Array> {
    const bytes = await this.#source.openBlob(component.blob);
    if (bytes.byteLength !== component.blob.byte_len || sha256Digest(bytes) !== component.blob.digest) {
      throw new IntegrityError("materialize-blob-mismatch", `blob of ${JSON.stringify(component.relative_path)} does not match its digest or length`, {
        details: { path: component.relative_path, digest: component.blob.digest },
        status: 500,
      });
    }
    return bytes;
  }

  async #reserve(finalDir: string, session: string): Promise<void> {
    try {
      await fsp.mkdir(finalDir, { mode: TREE_DIR_MODE });
    } catch (error) {
      if (errnoCode(error) === "EEXIST") throw sessionExists(session);
      throw isStorageFull(error) ? storageFull("materialize the bundle", error) : error;
    }
  }

  async #write(tree: TreeWriter, dirs: readonly string[], jobs: readonly FileJob[]): Promise<void> {
    for (const d of dirs) await tree.mkdir(d);
    for (const job of jobs) {
      const bytes = job.content ?? (await this.#verifiedBlob(job.component as Component));
      const fh = await tree.createFile(job.target);
      try {
        await fh.chmod(TREE_FILE_MODE);
        await fh.writeFile(bytes);
        await fh.sync();
      } finally {
        await fh.close();
      }
    }
    await tree.sync();
  }
}
