/**
 * The `warden` CLI end to end, against a real `warden serve` child found the way a user's shell
 * finds it (WARDEN_HOME → node.json + token): every command's --help, --json output, exit codes
 * 0 / 1 / 2 (DESIGN.md "CLI"), and failures as exactly one `warden: …` line with no stack trace.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { execFile } from "node:child_process";
import { createServer } from "node:http";
import { promisify } from "node:util";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { hostname } from "node:os";
import { main } from "../../src/cli/main.js";
import { closedPort, fixtureAgents, removeHome, repo, startNode, warden as runWarden, type CliRun, type NodeProcess } from "../support/node.js";
import { tempDir } from "../support/temp.js";
import { wardenInProcess } from "../support/cli.js";

const example = join(repo, "examples", "review-bundle");
const COMMANDS = [
  ["push"],
  ["bundles"],
  ["bundles", "show"],
  ["materialize"],
  ["invoke"],
  ["invocations"],
  ["invocations", "show"],
  ["inspect"],
  ["reconcile"],
  ["journal", "verify"],
];

function assertOneErrorLine(run: CliRun, code: number, problem: string): void {
  assert.equal(run.code, code, `exit code; stdout: ${run.stdout} stderr: ${run.stderr}`);
  const lines = run.stderr.trimEnd().split("\n");
  assert.equal(lines.length, 1, `exactly one line on stderr, got: ${run.stderr}`);
  assert.match(lines[0]!, /^warden: /);
  assert.ok(lines[0]!.includes(`(${problem})`), `names ${problem}: ${lines[0]}`);
  assert.doesNotMatch(run.stderr, /\n\s+at |Error:/, "no stack trace");
}

const inProcess = (args: readonly string[], env: Record<string, string>): Promise<CliRun> => wardenInProcess(args, { env, cwd: repo });

function json<T>(run: CliRun): T {
  try {
    return JSON.parse(run.stdout) as T;
  } catch {
    throw new Error(`not JSON (exit ${run.code}): ${run.stdout} ${run.stderr}`);
  }
}

interface InvocationJson {
  status: string;
  scope: string;
  id: string;
  run_id?: string;
  replayed?: boolean;
  result?: { exit_code: number };
  error?: { code: string; status: number };
}

describe("warden CLI against a real node", () => {
  let node: NodeProcess;
  const scratch = tempDir("cli-e2e");
  const workspace = join(scratch, "workspace");
  const startsLog = join(scratch, "starts.log");
  /** The CLI in this process, through main() (what src/cli/run.ts calls): fast, same code path. */
  const warden = (args: string[], env: Record<string, string> = {}): Promise<CliRun> => inProcess(args, { WARDEN_HOME: node.home, ...env });
  /** The CLI as its own process, for exit codes as a shell sees them. */
  const wardenProcess = (args: string[], env: Record<string, string> = {}): Promise<CliRun> => runWarden(args, { env: { WARDEN_HOME: node.home, ...env } });

  before(async () => {
    mkdirSync(workspace);
    node = await startNode({
      args: ["--workspace", `demo=${workspace}`, "--provider", `claude=${join(fixtureAgents, "claude.mjs")}`],
      env: { WARDEN_FIXTURE_STARTS: startsLog },
      // Runs left hanging by these tests are cut after 1 s at shutdown, not the default 10 s.
      config: { shutdownGraceS: 1 },
    });
  });
  after(async () => {
    await node?.stop();
    removeHome(node);
    rmSync(scratch, { recursive: true, force: true });
  });

  it("every command has --help (exit 0, usage on stdout, nothing on stderr)", async () => {
    for (const command of COMMANDS) {
      const run = await warden([...command, "--help"]);
      assert.equal(run.code, 0, command.join(" "));
      assert.match(run.stdout, new RegExp(`^Usage: warden ${command.join(" ")}`));
      assert.equal(run.stderr, "");
    }
  });

  it("as a process: exit 0 for a result, 2 for a run in progress, 1 for a refusal; errors are one line", async () => {
    const id = randomUUID();
    const hang = ["invoke", "--id", id, "--provider", "claude", "--workspace", "demo", "--wait", "0", "--timeout", "20", "--", "wait #hang"];
    const [done, running, refused] = await Promise.all([
      wardenProcess(["invoke", "--id", randomUUID(), "--provider", "claude", "--workspace", "demo", "--", "hello"]),
      wardenProcess(hang),
      wardenProcess(["bundles", "show", "no-such-bundle"]),
    ]);
    assert.equal(done.code, 0, done.stderr);
    assert.match(done.stdout, /^recorded api:operator /);
    assert.equal(running.code, 2, running.stderr);
    assert.match(running.stdout, /^running api:operator /);
    assertOneErrorLine(refused, 1, "bundle-not-found");
    assertOneErrorLine(await wardenProcess(hang), 2, "in-progress");
  });

  it("push prints the receipt; a second push sends nothing; bundles lists and shows it", async () => {
    const first = await warden(["push", example]);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /^committed review-bundle@[0-9a-f]{12}$/m);
    assert.match(first.stdout, /sent\s+2\.\d KiB in 6 blob\(s\)/);
    const again = json<{ already_committed: boolean; bytes_sent: number; receipt: { revision: string; bundle_digest: string } }>(await warden(["push", example, "--json"]));
    assert.equal(again.already_committed, true);
    assert.equal(again.bytes_sent, 0);
    assert.equal(again.receipt.revision, again.receipt.bundle_digest.slice("sha256:".length, "sha256:".length + 12), "revision = 12 hex of the bundle digest");

    const [list, show, text, missing] = await Promise.all([
      warden(["bundles", "--json"]),
      warden(["bundles", "show", "review-bundle", "--json"]),
      warden(["bundles"]),
      warden(["bundles", "show", "no-such-bundle"]),
    ]);
    assert.deepEqual(json<{ bundles: { bundle_id: string }[] }>(list).bundles.map((b) => b.bundle_id), ["review-bundle"]);
    assert.equal(json<{ revisions: { revision: string }[] }>(show).revisions[0]!.revision, again.receipt.revision);
    assert.match(text.stdout, /^review-bundle {2}1 revision\(s\), latest [0-9a-f]{12}/);
    assertOneErrorLine(missing, 1, "bundle-not-found");
  });

  it("invoke runs once and replays (exit 0); another request under the id is refused (exit 1)", async () => {
    const id = randomUUID();
    const args = ["invoke", "--id", id, "--provider", "claude", "--workspace", "demo", "--json", "--", "list", "the", "files"];
    const first = await warden(args);
    assert.equal(first.code, 0, first.stderr);
    const ran = json<InvocationJson>(first);
    assert.equal(ran.status, "recorded");
    assert.equal(ran.replayed, false);
    assert.equal(ran.scope, "api:operator");
    assert.equal(ran.result?.exit_code, 0);
    const replay = await warden(args);
    assert.equal(replay.code, 0);
    assert.equal(json<InvocationJson>(replay).replayed, true);
    assert.equal(json<InvocationJson>(replay).run_id, ran.run_id);
    const starts = readFileSync(startsLog, "utf8").split("\n").filter((line) => line.includes("list the files"));
    assert.equal(starts.length, 1, "the agent was started once for two invokes");

    const text = await warden(["invoke", "--id", id, "--provider", "claude", "--workspace", "demo", "--", "list", "the", "files"]);
    assert.equal(text.code, 0);
    assert.match(text.stdout, /^recorded api:operator [0-9a-f-]{36} \(replayed/);
    const conflict = await warden(["invoke", "--id", id, "--provider", "claude", "--workspace", "demo", "--json", "--", "something", "else"]);
    assertOneErrorLine(conflict, 1, "idempotency-conflict");
    assert.equal(json<InvocationJson>(conflict).error?.code, "idempotency-conflict");

    const [verified, verifiedJson] = await Promise.all([warden(["journal", "verify", ran.run_id!]), warden(["journal", "verify", ran.run_id!, "--json"])]);
    assert.equal(verified.code, 0, verified.stderr);
    assert.match(verified.stdout, new RegExp(`^OK ${ran.run_id}: \\d+ entries verified`));
    const report = json<{ ok: boolean; entries: number; requires_reconciliation: boolean }>(verifiedJson);
    assert.equal(report.ok, true);
    assert.ok(report.entries >= 4);
    assert.equal(report.requires_reconciliation, false);

    // A journal saved to a file, verified where no home holds the keys (a fleet keeps them in its
    // database): the node named with --url or $WARDEN_URL lends its published keys.
    const saved = join(scratch, "saved.ndjson");
    const token = readFileSync(join(node.home, "token"), "utf8").trim();
    writeFileSync(saved, Buffer.from(await (await fetch(`${node.url}/v1/runs/${ran.run_id!}/journal`, { headers: { authorization: `Bearer ${token}` } })).arrayBuffer()));
    const keyless = join(scratch, "keyless-home");
    mkdirSync(keyless, { recursive: true, mode: 0o700 });
    assertOneErrorLine(await inProcess(["journal", "verify", saved], { WARDEN_HOME: keyless }), 1, "no-trusted-keys");
    const byNode = await inProcess(["journal", "verify", saved], { WARDEN_HOME: keyless, WARDEN_URL: node.url, WARDEN_TOKEN: token });
    assert.equal(byNode.code, 0, byNode.stderr);
    assert.match(byNode.stdout, /^OK /);
    const byFlag = await inProcess(["journal", "verify", saved, "--url", node.url], { WARDEN_HOME: keyless, WARDEN_TOKEN: token });
    assert.equal(byFlag.code, 0, byFlag.stderr);
  });

  it("a retry's --wait waits for the run an earlier call started, asking again until it ends", async () => {
    const id = randomUUID();
    // The run hangs until its 2 s timeout cuts it: it then reads unresolved.
    const args = (wait: string): string[] => ["invoke", "--id", id, "--provider", "claude", "--workspace", "demo", "--wait", wait, "--timeout", "2", "--", "wait #hang"];
    const first = await warden(args("0"));
    assert.equal(first.code, 2, first.stderr);
    assertOneErrorLine(await warden(args("0")), 2, "in-progress");
    const started = performance.now();
    const retried = await warden(args("20"));
    assertOneErrorLine(retried, 2, "unresolved");
    assert.ok(performance.now() - started < 15_000, "it answered once the run ended, not at the end of --wait");
  });

  it("a run still going answers exit 2 (running, then in-progress) and is listed", async () => {
    const id = randomUUID();
    const args = ["invoke", "--id", id, "--provider", "claude", "--workspace", "demo", "--wait", "1", "--timeout", "20", "--json", "--", "wait #hang"];
    const first = await warden(args);
    assert.equal(first.code, 2, first.stderr);
    assert.equal(json<InvocationJson>(first).status, "running");
    const second = await warden(args);
    assertOneErrorLine(second, 2, "in-progress");
    const [shown, listed, all, inspected] = await Promise.all([
      warden(["invocations", "show", "api:operator", id, "--json"]),
      warden(["invocations", "--status", "in_progress", "--json"]),
      warden(["invocations", "--json"]),
      warden(["inspect", "api:operator", id]),
    ]);
    assert.equal(shown.code, 2);
    assert.equal(json<InvocationJson>(shown).status, "in_progress");
    assert.ok(json<{ items: { id: string }[] }>(listed).items.some((i) => i.id === id));
    // `invocations list --help` says the order is by scope and id: it is.
    const keys = json<{ items: { scope: string; id: string }[] }>(all).items.map((i) => `${i.scope}\n${i.id}`);
    assert.ok(keys.length >= 3, "earlier tests left several invocations");
    assert.deepEqual(keys, [...keys].sort());
    // A live run's journal is open, but nothing awaits an operator yet.
    assert.match(inspected.stdout, /^in_progress api:operator /);
    assert.match(inspected.stdout, /needs review\s+not yet: the run is still in progress$/m);
    // Where the agent runs, to check before stating its effects stopped.
    assert.match(inspected.stdout, new RegExp(`^\\s*agent process\\s+pid \\d+ on ${hostname()}$`, "m"));
    // Reconciling it is refused as "not yet" (exit 2), naming the status it found.
    const { snapshot_hash } = json<{ snapshot_hash: string }>(await warden(["inspect", "api:operator", id, "--json"]));
    const reviewFile = join(scratch, "running-review.json");
    writeFileSync(
      reviewFile,
      JSON.stringify({ snapshot_hash, outcome: "no_effects", rationale: "too early", evidence: [{ reference: "OPS-0", sha256: "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126" }], effects_stopped: true }),
    );
    const early = await warden(["reconcile", "api:operator", id, "--review", reviewFile, "--json"]);
    assertOneErrorLine(early, 2, "invocation-not-unresolved");
    assert.equal(json<{ error: { invocation_status: string } }>(early).error.invocation_status, "in_progress");
  });

  it("an unresolved run answers exit 2 until an operator reconciles it; then it stays closed (exit 1)", async () => {
    const id = randomUUID();
    const args = ["invoke", "--id", id, "--provider", "claude", "--workspace", "demo", "--", "fix it #kill"];
    assertOneErrorLine(await warden(args), 2, "unresolved");
    const retried = await warden(args);
    assertOneErrorLine(retried, 2, "unresolved");
    // All a caller sees: it names the run and the command an operator starts from.
    assert.match(retried.stderr, new RegExp(`\\(run [0-9a-f-]{36}\\) is unresolved: .*\`warden inspect \\S+ ${id}\``));
    const listed = json<{ items: { id: string; status: string }[] }>(await warden(["invocations", "--status", "unresolved", "--json"]));
    assert.deepEqual(listed.items.filter((i) => i.id === id).map((i) => i.status), ["unresolved"]);

    const [inspection, inspectionText] = await Promise.all([warden(["inspect", "api:operator", id, "--json"]), warden(["inspect", "api:operator", id])]);
    assert.equal(inspection.code, 0, inspection.stderr);
    assert.match(inspectionText.stdout, /needs review\s+yes$/m);
    const { snapshot_hash } = json<{ snapshot_hash: string }>(inspection);
    // The template as printed names no real evidence and is refused; with --evidence it lists each
    // file with its sha256, and the operator fills in only the outcome and the rationale.
    const reviewFile = join(scratch, "review.json");
    const bare = await warden(["inspect", "api:operator", id, "--review-template"]);
    assert.equal(bare.code, 0, bare.stderr);
    writeFileSync(reviewFile, bare.stdout);
    // One answer names every problem of the template, each on a line of its own with its code.
    const bareRefused = await warden(["reconcile", "api:operator", id, "--review", reviewFile]);
    assert.equal(bareRefused.code, 1, bareRefused.stderr);
    assert.deepEqual(bareRefused.stderr.trimEnd().split("\n").map((line) => /\(([a-z-]+)\)$/.exec(line)?.[1]), [
      "review-invalid",
      "review-invalid-outcome",
      "review-invalid-rationale",
      "review-invalid-evidence",
      "review-effects-not-stopped",
    ]);
    assert.match(bareRefused.stderr, /^warden: the review has 4 problems: outcome, rationale, evidence\[0\]\.sha256, effects_stopped \(review-invalid\)\n/);
    const evidence = "operator checked the workspace: unchanged\n";
    const notes = join(scratch, "notes.txt");
    writeFileSync(notes, evidence);
    assertOneErrorLine(await warden(["inspect", "api:operator", id, "--evidence", notes]), 1, "evidence-without-template");
    assertOneErrorLine(await warden(["inspect", "api:operator", id, "--review-template", "--evidence", join(scratch, "missing.txt")]), 1, "file-not-found");
    const template = json<Record<string, unknown>>(await warden(["inspect", "api:operator", id, "--review-template", "--evidence", notes]));
    assert.deepEqual(template.evidence, [{ reference: notes, sha256: `sha256:${createHash("sha256").update(evidence).digest("hex")}` }]);
    assert.equal(template.snapshot_hash, snapshot_hash);
    // Even with real evidence the template is refused unedited: its outcome must be chosen.
    writeFileSync(reviewFile, JSON.stringify(template));
    const templateRefused = await warden(["reconcile", "api:operator", id, "--review", reviewFile, "--json"]);
    assert.equal(templateRefused.code, 1);
    assert.deepEqual(
      json<{ error: { problems: { field: string; code: string }[] } }>(templateRefused).error.problems.map((p) => `${p.field} ${p.code}`),
      ["outcome review-invalid-outcome", "rationale review-invalid-rationale", "effects_stopped review-effects-not-stopped"],
    );
    const review = { ...template, outcome: "no_effects", rationale: "the agent was killed after one read; nothing was written", effects_stopped: true };
    writeFileSync(reviewFile, JSON.stringify(review));
    const reconciled = await warden(["reconcile", "api:operator", id, "--review", reviewFile, "--json"]);
    assert.equal(reconciled.code, 0, reconciled.stderr);
    const receipt = json<{ created: boolean; receipt: { review: { snapshot_hash: string }; sig: string } }>(reconciled);
    assert.equal(receipt.created, true);
    assert.equal(receipt.receipt.review.snapshot_hash, snapshot_hash);
    const same = json<{ created: boolean; receipt: { sig: string } }>(await warden(["reconcile", "api:operator", id, "--review", reviewFile, "--json"]));
    assert.equal(same.created, false);
    assert.equal(same.receipt.sig, receipt.receipt.sig, "the same review answers the same receipt");

    assertOneErrorLine(await warden(args), 1, "reconciled");
    const shown = await warden(["invocations", "show", "api:operator", id]);
    // Reconciled has one exit code, whatever the review's outcome (here no_effects; failed below).
    assert.equal(shown.code, 1);
    assert.match(shown.stdout, /^reconciled api:operator/);
    const closed = await warden(["inspect", "api:operator", id]);
    assert.match(closed.stdout, /^reconciled api:operator /);
    assert.match(closed.stdout, /needs review\s+no: already reconciled$/m, "a reconciled run's journal still has its unknown effect, but its review is done");
    assertOneErrorLine(await warden(["inspect", "api:operator", id, "--review-template"]), 1, "invocation-not-unresolved");

    writeFileSync(reviewFile, "{not json");
    assertOneErrorLine(await warden(["reconcile", "api:operator", id, "--review", reviewFile]), 1, "review-json-invalid");
  });

  it("an invocation an operator reconciled shows exit 1 (no recorded result), as failed as no_effects, and journal verify shows the receipt", async () => {
    const id = randomUUID();
    assertOneErrorLine(await warden(["invoke", "--id", id, "--provider", "claude", "--workspace", "demo", "--", "break it #kill"]), 2, "unresolved");
    const { snapshot_hash } = json<{ snapshot_hash: string }>(await warden(["inspect", "api:operator", id, "--json"]));
    const reviewFile = join(scratch, "failed-review.json");
    const evidence = `sha256:${createHash("sha256").update("the half-written branch").digest("hex")}`;
    writeFileSync(reviewFile, JSON.stringify({ snapshot_hash, outcome: "failed", rationale: "the agent died mid-write", evidence: [{ reference: "OPS-2", sha256: evidence }], effects_stopped: true }));
    assert.equal((await warden(["reconcile", "api:operator", id, "--review", reviewFile])).code, 0);
    const shown = await wardenProcess(["invocations", "show", "api:operator", id]);
    assert.equal(shown.code, 1, shown.stdout + shown.stderr);
    assert.match(shown.stdout, /^reconciled api:operator .*\n(.*\n)*\s+reconciled\s+failed by operator/);
    // The journal still requires reconciliation (it is append-only, its writer gone); verify says it had one.
    const runId = json<{ run_id: string }>(await warden(["invocations", "show", "api:operator", id, "--json"])).run_id;
    const [verified, verifiedJson] = await Promise.all([warden(["journal", "verify", runId]), warden(["journal", "verify", runId, "--json"])]);
    assert.equal(verified.code, 0, verified.stderr);
    assert.match(verified.stdout, /^requires reconciliation: /m);
    assert.match(verified.stdout, /^reconciled: failed by operator at \d{4}-\d\d-\d\dT[\d:.]+Z; its signed receipt covers this journal$/m);
    const report = json<{ reconciliation?: { outcome: string; operator: string; receipt_ok: boolean } }>(verifiedJson);
    assert.deepEqual({ ...report.reconciliation, recorded_at: undefined }, { outcome: "failed", operator: "operator", recorded_at: undefined, receipt_ok: true });
  });

  it("materialize copies the provider's tree into a new private --dir and points the launch at it", async () => {
    // A copy under another name, so this test owns its bundle id.
    const plugin = join(scratch, "review-plugin");
    cpSync(example, plugin, { recursive: true });
    assert.equal((await warden(["push", plugin])).code, 0);
    const dir = join(scratch, "materialized");
    const run = await warden(["materialize", "review-plugin", "--provider", "claude", "--dir", dir, "--json"]);
    assert.equal(run.code, 0, run.stderr);
    const launch = json<{ root: string; args: string[]; env: Record<string, string> }>(run);
    assert.equal(launch.root, dir);
    assert.deepEqual(launch.args, ["--plugin-dir", join(dir, "bundle")]);
    for (const file of [".claude-plugin/plugin.json", ".mcp.json", "README.md", "skills/code-review/SKILL.md", "skills/code-review/checklist.md", "skills/commit-message/SKILL.md"]) {
      assert.deepEqual(readFileSync(join(dir, "bundle", file)), readFileSync(join(plugin, file)), file);
      assert.equal(statSync(join(dir, "bundle", file)).mode & 0o777, 0o600);
    }
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    // The node's own tree went once copied: it would only take one of the node's places.
    const session = json<{ session: string }>(run).session;
    assert.equal(existsSync(join(node.home, "materializations", session)), false);
    assertOneErrorLine(await warden(["materialize", "review-plugin", "--provider", "claude", "--dir", dir]), 1, "target-exists");
    // The check line it prints is pasted as is into a shell, with the real claude (the pinned
    // devDependency), offline: it validates the plugin, not the directory above it.
    const pasted = await warden(["materialize", "review-plugin", "--provider", "claude", "--dir", join(scratch, "materialized to paste")]);
    assert.equal(pasted.code, 0, pasted.stderr);
    const check = /^\s*check\s+(.+)$/m.exec(pasted.stdout)?.[1];
    assert.equal(check, `claude plugin validate '${join(scratch, "materialized to paste", "bundle")}'`);
    assert.match(pasted.stdout, /^\s*launch\s+claude --plugin-dir '.*\/materialized to paste\/bundle'$/m);
    const offline = "http://127.0.0.1:9";
    const validated = await promisify(execFile)("sh", ["-c", check!], {
      cwd: scratch,
      env: {
        PATH: `${join(repo, "node_modules", ".bin")}:${process.env.PATH ?? "/usr/bin:/bin"}`,
        HOME: scratch,
        ANTHROPIC_BASE_URL: offline,
        HTTPS_PROXY: offline,
        HTTP_PROXY: offline,
        DISABLE_AUTOUPDATER: "1",
        DISABLE_TELEMETRY: "1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      },
    });
    assert.match(validated.stdout, /Validation passed/);
    // A bundle a provider cannot consume is refused before anything is created: Kimi has no
    // MCP contract for the bundle's .mcp.json.
    const refused = join(scratch, "refused");
    assertOneErrorLine(await warden(["materialize", "review-plugin", "--provider", "kimi", "--dir", refused]), 1, "kimi-mcp-unsupported");
    assert.equal(existsSync(refused), false);
    // Retiring takes a named revision, never the implied latest one; a retired one is refused.
    assertOneErrorLine(await warden(["bundles", "retire", "review-plugin"]), 1, "bundle-ref-revision-required");
    const { revisions } = json<{ revisions: { revision: string }[] }>(await warden(["bundles", "show", "review-plugin", "--json"]));
    const revision = revisions[0]!.revision;
    const retired = await warden(["bundles", "retire", `review-plugin@${revision}`]);
    assert.equal(retired.code, 0, retired.stderr);
    assert.match(retired.stdout, new RegExp(`^retired review-plugin@${revision}; \\d+ blob\\(s\\) no longer referenced were deleted\n$`));
    assertOneErrorLine(await warden(["materialize", `review-plugin@${revision}`, "--provider", "claude"]), 1, "revision-retired");
  });

  it("materialize --dir gives the node's tree back when the copy fails too", async () => {
    const plugin = join(scratch, "copy-fails-plugin");
    cpSync(example, plugin, { recursive: true });
    assert.equal((await warden(["push", plugin, "--bundle-id", "copy-fails"])).code, 0);
    const trees = (): string[] => readdirSync(join(node.home, "materializations")).filter((name) => /^[0-9a-f-]{36}$/.test(name));
    const before = trees();
    // A parent that does not exist: the node builds its tree, the copy then fails.
    const run = await warden(["materialize", "copy-fails", "--provider", "claude", "--dir", join(scratch, "no-such-parent", "out")]);
    assert.equal(run.code, 1, run.stdout);
    assert.deepEqual(trees(), before, "no tree is left on the node under a session nobody was told");
  });

  it("the local token goes to the local node only, also by --url, never to another URL", async () => {
    const byUrl = await warden(["bundles", "--json", "--url", node.url]);
    assert.equal(byUrl.code, 0, byUrl.stderr);
    const auth: (string | undefined)[] = [];
    const other = createServer((req, res) => {
      auth.push(req.headers.authorization);
      res.writeHead(200, { "content-type": "application/json" }).end('{"bundles":[]}');
    });
    await new Promise<void>((done) => other.listen(0, "127.0.0.1", done));
    try {
      const run = await warden(["bundles", "--url", `http://127.0.0.1:${(other.address() as AddressInfo).port}`]);
      assert.equal(run.code, 0, run.stderr);
      assert.deepEqual(auth, [undefined], "no Authorization header went to the other node");
    } finally {
      await new Promise((done) => other.close(done));
    }
  });

  it("failures are one line and exit 1: no node, wrong token, no token, unreachable node, bad option", async () => {
    const empty = join(scratch, "empty-home");
    mkdirSync(empty, { mode: 0o700 });
    const [noNode, wrongToken, noToken, unreachable, badWait, badId] = await Promise.all([
      inProcess(["bundles"], { WARDEN_HOME: empty }),
      inProcess(["bundles"], { WARDEN_URL: node.url, WARDEN_TOKEN: "wrong" }),
      inProcess(["bundles"], { WARDEN_URL: node.url, WARDEN_HOME: empty }),
      inProcess(["push", example], { WARDEN_URL: `http://127.0.0.1:${await closedPort()}`, WARDEN_TOKEN: "x" }),
      warden(["invoke", "--id", randomUUID(), "--provider", "claude", "--wait", "soon", "--", "hi"]),
      warden(["invoke", "--id", "not-a-uuid", "--provider", "claude", "--", "hi"]),
    ]);
    assertOneErrorLine(noNode, 1, "node-not-found");
    assertOneErrorLine(wrongToken, 1, "unauthorized");
    assertOneErrorLine(noToken, 1, "unauthorized");
    assert.match(noToken.stderr, /\$WARDEN_TOKEN/, "no token sent: the message says where the CLI takes one from");
    assertOneErrorLine(unreachable, 1, "node-unreachable");
    assert.match(unreachable.stderr, /run the same push again once the node is reachable/, "a push says how to go on");
    assert.equal(badWait.code, 1);
    assert.equal(badWait.stderr.trimEnd().split("\n").length, 1, badWait.stderr);
    assert.match(badWait.stderr, /--wait must be a non-negative integer/);
    assertOneErrorLine(badId, 1, "invocation-id-invalid");
  });
});
