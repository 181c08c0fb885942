/** `warden journal …`: commands on signed run journals. */
import { join, resolve } from "node:path";
import type { Command } from "commander";
import { ValidationError, isWardenError } from "../../core/errors.js";
import { resolveLimits } from "../../core/limits.js";
import type { RunInspection } from "../../journal/inspect.js";
import type { VerifyReport } from "../../journal/verify.js";
import type { PublicKeyRecord } from "../../journal/types.js";
import type { ReconciliationReceipt } from "../../client/wire.js";
import type { VerifiedCheckpoint } from "../../tlog/policy.js";
import type { RunProofDocument } from "../../tlog/verify.js";
import { resolveHome, type CliContext } from "../context.js";
import { formatBytes } from "../format.js";
import { runCommand } from "../outcome.js";
import { connect, nonEmpty } from "../node.js";
import { readInputFile } from "../read-input.js";
import { fetchRunJournal, isRunIdArgument, summarizeReceipt, type ReconciliationSummary, type RemoteJournal } from "../remote-journal.js";
import { shownText } from "../terminal-text.js";

export interface VerifyFlags {
  key?: string;
  home?: string;
  url?: string;
  json?: boolean;
  policy?: string;
  checkpoint?: string;
  proof?: string;
}

const KEY_FILE_MAX_BYTES = 1024;

export function registerJournalCommands(program: Command, ctx: CliContext): void {
  const journal = program.command("journal").description("signed, hash-chained run journals");
  journal
    .command("verify")
    .description("verify a run journal: signatures, hash chain, canonical bytes and event order")
    .argument("<run_id|file>", "a journal file (one run, one signed entry per line), or a run id: its journal is fetched from the node and verified here")
    .option("--key <file>", "trust this public key (file holding standard base64 of the raw 32-byte Ed25519 key)")
    .option("--home <dir>", "without --key, trust the keys of this state directory (default $WARDEN_HOME or ./.warden); for a run id, the local node to ask")
    .option("--url <url>", "for a run id: the node to fetch it from (default $WARDEN_URL, else the local node); its published keys are trusted unless --key is given")
    .option("--json", "print {ok, entries, first_error?, requires_reconciliation, reasons, tail_hash, reconciliation?} as JSON")
    .option("--policy <file>", "also check that the run's seal is in the node's transparency log (a reconciled run: its receipt's leaf, and its seal where the node has one): a C2SP tlog-policy file (the node's log key, the witnesses, the quorum)")
    .option("--proof <file>", "with --policy: the run's log proof (the JSON of GET /v1/log/runs/{run_id}) instead of asking the node")
    .option("--checkpoint <file>", "with --policy: prove into this checkpoint (a signed note) instead of the proof's own")
    .action((file: string, flags: VerifyFlags) => runCommand(ctx, flags, () => verifyCommand(ctx, file, flags)));
}

/** The keys a verification trusts: `--key`, else the node's published ones (`nodeKeys`, `--url`), else the home's. */
export async function trustedKeys(ctx: CliContext, flags: VerifyFlags, nodeKeys?: () => Promise<readonly PublicKeyRecord[]>): Promise<readonly PublicKeyRecord[]> {
  if (flags.key !== undefined) {
    const path = resolve(ctx.io.cwd, flags.key);
    const text = (await readInputFile(path, KEY_FILE_MAX_BYTES)).toString("utf8").trim();
    const { publicKeyRecord } = await import("../../journal/keys.js");
    try {
      return [publicKeyRecord(text)];
    } catch (error) {
      if (isWardenError(error)) throw new ValidationError(error.code, `${path}: ${error.message}`);
      throw error;
    }
  }
  if (nodeKeys !== undefined) return nodeKeys();
  // A node named outright (--url, $WARDEN_URL): its published keys, as for a run id. A fleet keeps
  // its keys in its database, so no home holds them.
  if (nonEmpty(flags.url) || nonEmpty(ctx.io.env.WARDEN_URL)) return (await connect(ctx.io, flags)).keys();
  const dir = join(resolveHome(ctx.io, flags.home), "keys");
  const { EmbeddedKeyStore } = await import("../../backends/embedded/journal/key-store.js");
  const keys = await new EmbeddedKeyStore(dir).publicKeys();
  if (keys.length === 0) {
    throw new ValidationError("no-trusted-keys", `no public keys in ${dir}; pass --key FILE, --home DIR, or --url URL to trust that node's published keys`);
  }
  return keys;
}

async function verifyCommand(ctx: CliContext, file: string, flags: VerifyFlags): Promise<number> {
  const remote = isRunIdArgument(ctx.io, file) ? await fetchRunJournal(ctx.io, file, flags) : undefined;
  const keys = await trustedKeys(ctx, flags, remote?.nodeKeys);
  const maxBytes = resolveLimits().journalBytes;
  // One byte past the limit lets the verifier name the line that crosses it.
  const bytes = remote?.bytes ?? (await readInputFile(resolve(ctx.io.cwd, file), maxBytes + 1));
  const [{ verifyJournal }, { inspectRun }] = await Promise.all([import("../../journal/verify.js"), import("../../journal/inspect.js")]);
  const report = verifyJournal(bytes, keys, { maxBytes, ...(remote !== undefined ? { runId: file.toLowerCase() } : {}) });
  const inspection = inspectRun(report);
  const reconciled = remote !== undefined && inspection.requires_reconciliation ? await reconciliationOf(remote, report, keys) : undefined;
  const reconciliation = reconciled?.summary;
  if (flags.json === true) {
    ctx.io.stdout(
      JSON.stringify({
        ok: report.ok,
        entries: report.entries,
        ...(report.first_error !== undefined ? { first_error: report.first_error } : {}),
        requires_reconciliation: inspection.requires_reconciliation,
        reasons: inspection.reasons,
        tail_hash: report.tail_hash,
        ...(isolationOf(report) === undefined ? {} : { isolation: isolationOf(report) }),
        ...(reconciliation === undefined ? {} : { reconciliation }),
      }) + "\n",
    );
  } else if (report.first_error !== undefined) {
    const e = report.first_error;
    ctx.io.stdout(`FAIL ${file}: line ${e.line} (seq ${e.seq ?? "?"}): ${e.code}: ${shownText(e.reason, ctx.io.terminal === true)}\n`);
  } else if (!hasRunStarted(inspection)) {
    // Nothing here shows a run: an empty file, or signed lines none of which is a run.started at
    // seq 0. DESIGN counts that among what requires reconciliation, not as a verification error
    // (`ok` stays true in --json), but a script must not take it for a pass: no OK, exit 1.
    ctx.io.stdout(`NO RUN ${file}: ${report.entries} entries verified, no run.started at seq 0: nothing here shows what a run did\n`);
    ctx.io.stdout(`requires reconciliation: ${shownText(reasonsText(inspection), ctx.io.terminal === true)}\n`);
  } else {
    ctx.io.stdout(`OK ${file}: ${report.entries} entries verified, tail ${report.tail_hash}\n`);
    const isolation = isolationText(isolationOf(report));
    if (isolation !== undefined) ctx.io.stdout(`${isolation}\n`);
    // Effect ids name the agent's tool calls: on a terminal, made visible.
    if (inspection.requires_reconciliation) ctx.io.stdout(`requires reconciliation: ${shownText(reasonsText(inspection), ctx.io.terminal === true)}\n`);
    if (reconciliation !== undefined) ctx.io.stdout(`${reconciliationText(reconciliation)}\n`);
  }
  if (!(report.ok && hasRunStarted(inspection))) return 1;
  if (flags.policy === undefined) return 0;
  return (await loggedCommand(ctx, bytes, remote !== undefined ? file.toLowerCase() : runIdOf(bytes), flags, reconciled?.receipt)) ? 0 : 1;
}

/** The run id the journal's first entry names. */
function runIdOf(bytes: Uint8Array): string {
  const first = Buffer.from(bytes).toString("utf8").split("\n", 1)[0] ?? "";
  const runId = (JSON.parse(first) as { entry?: { run_id?: unknown } }).entry?.run_id;
  if (typeof runId !== "string") throw new ValidationError("journal-run-id-missing", "the journal's first line names no run");
  return runId;
}

/**
 * `--policy`: the journal is the run the log holds — its seal is a leaf included in a checkpoint
 * the policy accepts (the node's key and a quorum of witnesses). Checked here, never by the node.
 * A reconciled run (`receipt`) was never recorded, so it has no seal unless the node has one: its
 * seal is checked where the node has one, and the receipt's `run.reconciled` leaf always.
 */
export async function loggedCommand(ctx: CliContext, bytes: Uint8Array, runId: string, flags: VerifyFlags, receipt?: ReconciliationReceipt): Promise<boolean> {
  const { parsePolicy } = await import("../../tlog/policy.js");
  const { parseRunProof, verifyLoggedReconciliation, verifyLoggedRun } = await import("../../tlog/verify.js");
  const read = async (file: string, max: number): Promise<string> => (await readInputFile(resolve(ctx.io.cwd, file), max)).toString("utf8");
  const policy = parsePolicy(await read(flags.policy!, 64 * 1024));
  const checkpoint = flags.checkpoint === undefined ? undefined : await read(flags.checkpoint, 64 * 1024);
  const into = (document: RunProofDocument): RunProofDocument => (checkpoint === undefined ? document : { ...document, checkpoint });
  const cosigned = (c: VerifiedCheckpoint): string => (c.cosigners.length === 0 ? "no witness" : c.cosigners.join(", "));
  const say = (line: string): void => {
    if (flags.json !== true) ctx.io.stdout(`${line}\n`);
  };
  try {
    let seal: RunProofDocument | undefined;
    if (flags.proof !== undefined) seal = parseRunProof(JSON.parse(await read(flags.proof, 1024 * 1024)));
    else if (receipt === undefined) seal = await (await connect(ctx.io, flags)).logRunProof(runId);
    else seal = await absentAsUndefined((await connect(ctx.io, flags)).logRunProof(runId));
    if (seal !== undefined) {
      const logged = verifyLoggedRun(bytes, runId, into(seal), policy);
      say(`LOGGED run ${runId}: leaf ${logged.index} of ${logged.checkpoint.origin} at size ${logged.checkpoint.size}, cosigned by ${cosigned(logged.checkpoint)}`);
    } else {
      say(`NO SEAL run ${runId}: it was never recorded (it was reconciled instead), so the log holds no seal of it`);
    }
    if (receipt !== undefined) {
      const document = await (await connect(ctx.io, flags)).logReconciliationProof(runId);
      const logged = verifyLoggedReconciliation(receipt, runId, into(document), policy);
      say(`LOGGED reconciliation of run ${runId} by ${logged.statement.operator}: leaf ${logged.index} of ${logged.checkpoint.origin} at size ${logged.checkpoint.size}, cosigned by ${cosigned(logged.checkpoint)}`);
    }
    return true;
  } catch (error) {
    if (!isWardenError(error)) throw error;
    if (flags.json !== true) ctx.io.stdout(`NOT LOGGED run ${runId}: ${error.code}: ${error.message}\n`);
    else ctx.io.stdout(`${JSON.stringify({ logged: false, code: error.code, detail: error.message })}\n`);
    return false;
  }
}

/** A reconciled run's seal: the node answering that it logged none is an answer, not a failure. */
async function absentAsUndefined<T>(request: Promise<T>): Promise<T | undefined> {
  try {
    return await request;
  } catch (error) {
    if (isWardenError(error) && error.code === "log-leaf-not-found" && error.details?.run_id !== undefined) return undefined;
    throw error;
  }
}

/**
 * The node's reconciliation of the run, when it has one: a run that requires reconciliation may
 * well have had it, and the journal (append-only, its writer gone) never says so.
 */
async function reconciliationOf(
  remote: RemoteJournal,
  report: VerifyReport,
  keys: readonly PublicKeyRecord[],
): Promise<{ summary: ReconciliationSummary; receipt: ReconciliationReceipt } | undefined> {
  const first = report.valid[0];
  if (first === undefined || first.event.type !== "run.started") return undefined;
  const { scope, id } = first.event.invocation;
  const receipt = await remote.receipt(scope, id);
  if (receipt === undefined) return undefined;
  return { summary: await summarizeReceipt(receipt, keys, { run_id: first.run_id, entries: report.entries, tail_hash: report.tail_hash }), receipt };
}

function reconciliationText(r: ReconciliationSummary): string {
  const verdict = r.receipt_ok ? "its signed receipt covers this journal" : `its receipt does NOT verify: ${r.reason ?? "?"}`;
  return `reconciled: ${r.outcome} by ${r.operator} at ${r.recorded_at}; ${verdict}`;
}

function reasonsText(inspection: RunInspection): string {
  return inspection.reasons.map((r) => r.reason + (r.effect_id !== undefined ? ` (${r.effect_id})` : "")).join(", ");
}

function hasRunStarted(inspection: RunInspection): boolean {
  return !inspection.reasons.some((r) => r.reason === "no-run-started");
}

interface RecordedIsolation {
  readonly profile: { readonly kind?: unknown; readonly egress?: { readonly allow?: unknown }; readonly limits?: unknown; readonly env?: unknown; readonly mounts?: unknown; readonly seccomp?: { readonly deny?: unknown; readonly errno?: unknown }; readonly no_nested_user_namespaces?: unknown; readonly cgroup?: { readonly memory_bytes?: unknown; readonly all_runs_memory_bytes?: unknown; readonly tasks?: unknown; readonly all_runs_cpu_weight?: unknown } };
  readonly digest: string;
}

/** The confinement run.started recorded (DESIGN.md "Confinement"), when it recorded one. */
function isolationOf(report: { readonly valid: readonly { readonly event: { readonly type: string } }[] }): RecordedIsolation | undefined {
  const first = report.valid[0]?.event as { type: string; isolation?: RecordedIsolation } | undefined;
  return first?.type === "run.started" ? first.isolation : undefined;
}

/** One line: the sandbox's profile in short, or a warning for a run that ran unconfined. */
function isolationText(isolation: RecordedIsolation | undefined): string | undefined {
  if (isolation === undefined) return undefined;
  const p = isolation.profile;
  if (p.kind === "none") return `WARNING: isolation none: the agent ran unconfined, as the node's user, with its network and files (profile ${isolation.digest})`;
  const allow = Array.isArray(p.egress?.allow) ? (p.egress.allow as string[]).join(", ") || "nothing" : "?";
  // A directory bound at another path inside (the run home's tmp at /tmp) is shown with its source.
  const mounts = Array.isArray(p.mounts)
    ? (p.mounts as { path: string; access: string; what: string; source?: string }[])
        .filter((m) => m.access === "rw")
        .map((m) => (m.source === undefined || m.source.startsWith("{") ? m.path : `${m.path} (${m.source})`))
    : [];
  const env = Array.isArray(p.env) ? (p.env as string[]).join(" ") : "?";
  const refused = Array.isArray(p.seccomp?.deny) ? `; system calls refused ${(p.seccomp.deny as string[]).join(", ")} (${String(p.seccomp.errno)})` : "";
  const bounded =
    p.cgroup === undefined
      ? "; memory and tasks not bounded (no control groups)"
      : `; memory at most ${byteCount(p.cgroup.memory_bytes)} (all runs ${byteCount(p.cgroup.all_runs_memory_bytes)}), tasks at most ${String(p.cgroup.tasks)}${p.cgroup.all_runs_cpu_weight === undefined ? "" : `, all runs' CPU weight ${String(p.cgroup.all_runs_cpu_weight)}`} (control groups)`;
  const userns = p.no_nested_user_namespaces === true ? "; no user namespaces of its own" : "";
  return `isolation: ${String(p.kind)} profile ${isolation.digest}; egress to ${allow}; writable ${mounts.join(", ") || "nothing"}; limits ${JSON.stringify(p.limits ?? {})}${bounded}${refused}${userns}; environment ${env}`;
}

function byteCount(bytes: unknown): string {
  return typeof bytes === "number" ? formatBytes(bytes) : "?";
}
