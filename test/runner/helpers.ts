/**
 * A complete node for runner tests: embedded backend (claims, journals, keys), the real delivery
 * service holding a pushed bundle, a materializer on it, and a runner whose provider commands
 * are the fixture agents. Shared by the in-process tests and the child script of the kill -9 test.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { sha256Digest } from "../../src/core/digest.js";
import { openEmbeddedBackend, type EmbeddedBackend } from "../../src/backends/embedded/index.js";
import type { TrustPolicy } from "../../src/signing/policy.js";
import { bundleStatement } from "../../src/signing/statement.js";
import { openEmbeddedDelivery } from "../../src/backends/embedded/delivery/delivery-backend.js";
import type { JournalStoreHooks } from "../../src/backends/embedded/journal/journal-store.js";
import type { Delivery } from "../../src/delivery/service.js";
import { Invocations } from "../../src/invocations/index.js";
import { Materializer } from "../../src/providers/materializer.js";
import { resolveProfiles } from "../../src/providers/profiles.js";
import { Runner, type RunnerHooks } from "../../src/runner/runner.js";
import type { SpendConfig } from "../../src/runner/spend.js";
import { RunHomes } from "../../src/providers/run-home.js";
import { LaunchRecords } from "../../src/runner/launch-records.js";
import { verifyJournal } from "../../src/journal/verify.js";
import { inspectRun, type RunInspection } from "../../src/journal/inspect.js";
import type { JournalEntry } from "../../src/journal/types.js";
import { MemorySource, bytesOf, type BundleFile } from "../providers/helpers.js";
import { isAlive, killIfStillRecorded } from "../support/processes.js";

export { isAlive };

export const AGENTS = fileURLToPath(new URL("../fixtures/agents/", import.meta.url));
export const SCOPE = "runner-test";

export interface RunnerEnv {
  readonly root: string;
  readonly backend: EmbeddedBackend;
  readonly delivery: Delivery;
  readonly invocations: Invocations;
  readonly materializer: Materializer;
  readonly runner: Runner;
  readonly startsFile: string;
  readonly workspace: string;
  readonly matRoot: string;
  readonly outputDir: string;
  close(): Promise<void>;
}

export interface RunnerEnvOptions {
  readonly hooks?: RunnerHooks;
  readonly killGraceMs?: number;
  readonly commands?: Partial<Record<"claude" | "codex" | "kimi", string>>;
  readonly journalHooks?: JournalStoreHooks;
  /** record every agent under <home>/agents while it runs, as a node does */
  readonly launchRecords?: boolean;
  /** the trust policy for bundle signatures */
  readonly trust?: TrustPolicy;
  /** workspaces ("main") whose own provider configuration may run */
  readonly trustedWorkspaces?: readonly string[];
  /** more of the node's environment for its agents (e.g. the node user's HOME) */
  readonly env?: Readonly<Record<string, string>>;
  /** budgets and prices (DESIGN.md "Spend"); the day counters are the backend's */
  readonly spend?: SpendConfig;
}

/** Opens (or reopens, after a crash) the node under `root`. */
export async function openRunnerEnv(root: string, options: RunnerEnvOptions = {}): Promise<RunnerEnv> {
  const home = path.join(root, "home");
  const workspace = path.join(root, "workspace");
  fs.mkdirSync(workspace, { recursive: true });
  const startsFile = path.join(root, "starts.log");
  const backend = await openEmbeddedBackend({ home, ...(options.journalHooks === undefined ? {} : { journalHooks: options.journalHooks }) });
  const { delivery } = await openEmbeddedDelivery(home, options.trust === undefined ? {} : { trust: options.trust });
  const invocations = new Invocations({ claims: backend.claims, journals: backend.journals, keys: backend.keys, limits: backend.limits });
  const matRoot = path.join(home, "materializations");
  const materializer = new Materializer({ root: matRoot, source: delivery.reads });
  await materializer.sweep();
  const outputDir = path.join(home, "outputs");
  const cmd = (name: "claude" | "codex" | "kimi"): string => options.commands?.[name] ?? path.join(AGENTS, `${name}.mjs`);
  const runner = new Runner({
    invocations,
    materializer,
    workspaces: { main: workspace },
    defaultWorkspace: "main",
    outputDir,
    runHomes: new RunHomes(path.join(home, "run-homes")),
    profiles: resolveProfiles({ claude: { command: cmd("claude") }, codex: { command: cmd("codex") }, kimi: { command: cmd("kimi") } }),
    env: { PATH: process.env.PATH, WARDEN_FIXTURE_STARTS: startsFile, ...(options.env ?? {}) },
    ...(options.trustedWorkspaces === undefined ? {} : { trustedWorkspaces: options.trustedWorkspaces }),
    // These tests watch the agent from outside (its pids, a starts file beside the workspace):
    // unconfined by explicit choice; confinement has its own tests (test/security/sandbox*).
    isolation: "none",
    killGraceMs: options.killGraceMs ?? 300,
    ...(options.hooks === undefined ? {} : { hooks: options.hooks }),
    ...(options.spend === undefined ? {} : { spend: options.spend }),
    spendCounters: backend.spend,
    ...(options.launchRecords === true ? { launchRecords: LaunchRecords.open(home)! } : {}),
  });
  return {
    root,
    backend,
    delivery,
    invocations,
    materializer,
    runner,
    startsFile,
    workspace,
    matRoot,
    outputDir,
    async close() {
      await delivery.close();
      await backend.close();
    },
  };
}

/** Uploads and commits a bundle through the real delivery protocol. */
export async function pushBundle(
  delivery: Delivery,
  bundleId: string,
  revision: string,
  files: readonly BundleFile[],
  sign: (statement: string) => readonly string[] = () => [],
): Promise<void> {
  const manifest = new MemorySource().add(bundleId, revision, files);
  const byDigest = new Map(files.map((f) => [sha256Digest(bytesOf(f.content)), bytesOf(f.content)] as const));
  const begun = await delivery.begin(manifest);
  if (begun.committed) return;
  for (const missing of begun.missing) {
    await delivery.putChunk(begun.stage_id, missing.digest, missing.offset, (byDigest.get(missing.digest) as Uint8Array).subarray(missing.offset));
  }
  await delivery.commit(begun.stage_id, sign(bundleStatement(manifest)));
}

export interface StartRecord {
  readonly provider: string;
  readonly pid: number;
  /** its start time (/proc/<pid>/stat field 22), where /proc told one */
  readonly startTicks?: string;
  readonly argv: string[];
  readonly cwd: string;
  /** the agent's HOME as it found it at its start */
  readonly home?: { readonly path: string; readonly mode: number; readonly entries: string[] };
  readonly env?: { readonly TMPDIR?: string; readonly CLAUDE_CONFIG_DIR?: string; readonly CODEX_HOME?: string; readonly XDG_CONFIG_HOME?: string };
  readonly claudeSettings?: string;
  readonly codexConfig?: string;
}

export function starts(file: string): StartRecord[] {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as StartRecord);
}

/** A test's clean-up: SIGKILLs what still runs of the processes `file` records, and nothing that got one of their pids since. */
export function killStarts(file: string): void {
  for (const s of starts(file)) killIfStillRecorded(s);
}

/** Verifies a run's journal with the node's keys and inspects it. */
export async function journalOf(env: RunnerEnv, runId: string): Promise<{ ok: boolean; entries: readonly JournalEntry[]; inspection: RunInspection }> {
  const bytes = await env.backend.journals.read(runId, env.backend.limits.journalBytes);
  if (bytes === undefined) throw new Error(`no journal for ${runId}`);
  const report = verifyJournal(bytes, await env.backend.keys.publicKeys(), { runId });
  return { ok: report.ok, entries: report.valid, inspection: inspectRun(report) };
}

/** Waits until `pid` is dead (a signal's delivery is asynchronous); false if it outlives `ms`. */
export async function diesWithin(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (isAlive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}
