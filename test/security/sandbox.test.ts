/**
 * A hostile agent under the node's default confinement (real bubblewrap, real egress proxy): it
 * tries to read the node's key and tokens, the node's environment, the operator's ~/.claude and
 * ~/.ssh and another workspace; to write outside its workspace and into its bundle; to reach a
 * loopback port that is not allowed and one that is; to leave a setsid daemon; to signal the
 * node, ptrace it and read its /proc/<pid>/{environ,mem,...}. Each failure is asserted from the
 * outside: what reached the workspace, the files outside, the servers' own logs, the process
 * table, this process's signal count and tracer, and the run's journal.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { openWarden, type Warden } from "../../src/warden/facade.js";
import { cliCommand } from "../support/node.js";
import { probeSandbox } from "../../src/sandbox/probe.js";

const HOSTILE = fileURLToPath(new URL("../fixtures/agents/hostile.mjs", import.meta.url));
const CLAUDE = fileURLToPath(new URL("../fixtures/agents/claude.mjs", import.meta.url));
const SECRET = `secret-${randomUUID()}`;

interface Upstream {
  readonly port: number;
  readonly seen: string[];
  close(): void;
}

async function upstream(): Promise<Upstream> {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.url ?? "");
    res.end("upstream answer\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as { port: number }).port, seen, close: () => server.close() };
}


function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, [...cliCommand, ...args], { env: { ...process.env, WARDEN_HOME: "" } }, (error, stdout, stderr) =>
      done({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** The pid tracing `pid` (0: none), from the kernel's own account in /proc/<pid>/status. */
function tracerOf(pid: number): number {
  const line = fs.readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("TracerPid:"));
  assert.ok(line, `no TracerPid line in /proc/${pid}/status`);
  return Number(line.slice("TracerPid:".length).trim());
}

/** The agent's own record of one attempt (its stdout line `<what> <target>: <result>`). */
function attempt(tail: string, prefix: string): string {
  const line = tail.split("\n").find((l) => l.startsWith(`${prefix}: `));
  assert.ok(line !== undefined, `the agent recorded no "${prefix}" attempt:\n${tail}`);
  return line.slice(prefix.length + 2);
}

function markerAlive(marker: string): number[] {
  const pids: number[] = [];
  for (const pid of fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      if (fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker)) pids.push(Number(pid));
    } catch {
      // gone
    }
  }
  return pids;
}

describe("security: a hostile agent in the sandbox", () => {
  let root: string;
  let home: string;
  let userHome: string;
  let ws: string;
  let other: string;
  let warden: Warden;
  let allowed: Upstream;
  let denied: Upstream;
  let usr2 = 0;
  const onUsr2 = (): void => {
    usr2++;
  };
  const savedHome = process.env.HOME;

  before(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "warden-sandbox-"));
    home = path.join(root, "home");
    userHome = path.join(root, "user");
    ws = path.join(root, "ws");
    other = path.join(root, "other");
    for (const d of [ws, other, path.join(userHome, ".claude"), path.join(userHome, ".ssh")]) fs.mkdirSync(d, { recursive: true });
    fs.writeFileSync(path.join(other, "notes.txt"), `${SECRET} other workspace\n`);
    fs.writeFileSync(path.join(userHome, ".claude", "settings.json"), `{"secret": "${SECRET}"}\n`);
    fs.writeFileSync(path.join(userHome, ".ssh", "id_ed25519"), `${SECRET} ssh key\n`);
    allowed = await upstream();
    denied = await upstream();
    process.on("SIGUSR2", onUsr2);
    process.env.HOME = userHome;
    process.env.WARDEN_TOKEN = SECRET;
    warden = await openWarden({
      home,
      workspaces: { main: ws, other },
      providers: { kimi: { command: HOSTILE, promptArgs: ["--", "{prompt}"] }, claude: { command: CLAUDE } },
      sandbox: { egress: [`127.0.0.1:${allowed.port}`] },
    });
    fs.writeFileSync(path.join(home, "token"), `${SECRET} token\n`, { mode: 0o600 });
  });
  after(async () => {
    process.off("SIGUSR2", onUsr2);
    if (savedHome === undefined) delete process.env.HOME;
    else process.env.HOME = savedHome;
    delete process.env.WARDEN_TOKEN;
    await warden?.close();
    allowed?.close();
    denied?.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("reaches nothing of the node, the operator or other workspaces; egress is journaled", async () => {
    const keys = fs.readdirSync(path.join(home, "keys")).map((k) => path.join(home, "keys", k));
    assert.ok(keys.length > 0, "the node has a key to steal");
    const daemon = `daemon-${randomUUID()}`;
    const outside = path.join(root, "outside.txt");
    const plan = {
      read: [...keys, path.join(home, "token"), `/proc/${process.pid}/environ`, path.join(userHome, ".claude", "settings.json"), path.join(userHome, ".ssh", "id_ed25519"), path.join(other, "notes.txt")],
      write: [outside, path.join(other, "planted.txt"), path.join(home, "planted.txt")],
      connect: [
        { port: denied.port, marker: "denied" },
        { port: allowed.port, marker: "allowed" },
      ],
      daemon,
      signal: process.pid,
      ptrace: process.pid,
      proc: process.pid,
    };
    const outcome = await warden.invoke("test", randomUUID(), { provider: "kimi", prompt: JSON.stringify(plan), workspace: "main" });
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
    const result = (outcome as unknown as { result: { exit_code: number; output_tail: string } }).result;
    assert.equal(result.exit_code, 0, result.output_tail);

    // Nothing secret reached the workspace (what the agent stole, it copied there) or its output.
    const stolen = fs.readdirSync(ws).map((n) => fs.readFileSync(path.join(ws, n), "utf8"));
    for (const text of [...stolen, result.output_tail]) assert.ok(!text.includes(SECRET), `a secret reached the agent:\n${result.output_tail}`);
    const keyBytes = keys.map((k) => fs.readFileSync(k, "utf8"));
    for (const text of stolen) for (const key of keyBytes) assert.ok(!text.includes(key.slice(0, 64)), "the node's key reached the agent");
    // Nothing was written outside its workspace.
    for (const target of plan.write) assert.equal(fs.existsSync(target), false, `${target} was written`);
    // Egress: the denied server never saw a request, the allowed one saw the proxied one only.
    assert.deepEqual(denied.seen, []);
    assert.deepEqual(allowed.seen, ["/allowed"]);
    // No daemon outlived the run, and the node got no signal.
    assert.deepEqual(markerAlive(daemon), [], "the setsid daemon outlived its run");
    assert.equal(usr2, 0, "the agent signalled the node");
    // The ptrace attach was made and refused (the node's pid names nothing in the sandbox's pid
    // namespace, or names a process it may not trace); the kernel says nothing traces the node.
    const ptrace = attempt(result.output_tail, `ptrace ${process.pid}`);
    assert.ok(!ptrace.startsWith("not attempted"), `the ptrace attempt could not be made (${ptrace}): this test needs python3 at /usr/bin/python3 (Debian package python3)`);
    assert.match(ptrace, /^(ESRCH|EPERM)$/, "the agent attached to the node with ptrace");
    assert.equal(tracerOf(process.pid), 0, "the node is being traced after the run");
    // /proc/<node pid>/...: not there, or not readable; and nothing of it reached the workspace.
    for (const name of ["environ", "cmdline", "status", "maps", "mem"]) {
      assert.match(attempt(result.output_tail, `proc /proc/${process.pid}/${name}`), /^(ENOENT|EACCES|EPERM)$/, `the agent read the node's /proc/${process.pid}/${name}`);
      assert.equal(fs.existsSync(path.join(ws, `stolen-proc-${name}`)), false, `the node's ${name} reached the workspace`);
    }

    const runId = (outcome as unknown as { audit: { run_id: string } }).audit.run_id;
    const entries = Buffer.from(await warden.readJournal(runId))
      .toString("utf8")
      .trim()
      .split("\n")
      .map((l) => (JSON.parse(l) as { entry: { event: Record<string, unknown> } }).entry.event);
    const started = entries[0] as { isolation?: { profile: { kind: string; egress: { allow: string[] } }; digest: string } };
    assert.equal(started.isolation?.profile.kind, "bubblewrap");
    assert.deepEqual(started.isolation?.profile.egress.allow, [`127.0.0.1:${allowed.port}`]);
    const network = entries.filter((e) => e.type === "effect.finished" && typeof e.effect_id === "string" && e.effect_id.startsWith("egress-"));
    const byTarget = new Map(network.map((e) => [(e.detail as { egress: { target: string } }).egress.target, e]));
    const deniedEntry = byTarget.get(`127.0.0.1:${denied.port}`);
    const allowedEntry = byTarget.get(`127.0.0.1:${allowed.port}`);
    assert.equal(deniedEntry?.outcome, "failed", JSON.stringify(network));
    assert.equal((deniedEntry?.detail as { egress: { allowed: boolean } }).egress.allowed, false);
    assert.equal(allowedEntry?.outcome, "succeeded", JSON.stringify(network));
    const bytes = (allowedEntry?.detail as { egress: { bytes_up: number; bytes_down: number } }).egress;
    assert.ok(bytes.bytes_up > 0 && bytes.bytes_down > 0, JSON.stringify(bytes));
    // Every egress effect started was finished before the process effect (G6: a clean run).
    const processFinished = entries.findIndex((e) => e.type === "effect.finished" && e.effect_id === "process");
    for (const e of network) assert.ok(entries.indexOf(e) < processFinished);
    assert.equal((await warden.verifyRun(runId)).requires_reconciliation, false);
    // The node, which the agent tried to stop and trace, still serves a run.
    const next = await warden.invoke("test", randomUUID(), { provider: "kimi", prompt: "{}", workspace: "main" });
    assert.equal(next.status, "recorded", JSON.stringify(next));

    // `journal verify` prints the confinement it recorded.
    const file = path.join(root, "run.jsonl");
    fs.writeFileSync(file, await warden.readJournal(runId));
    const verified = await cli(["journal", "verify", file, "--home", home]);
    assert.equal(verified.code, 0, verified.stderr);
    assert.match(verified.stdout, new RegExp(`^isolation: bubblewrap profile ${started.isolation?.digest}; egress to 127\\.0\\.0\\.1:${allowed.port}; writable `, "m"));
  });

  it("cannot spend the machine's memory on files: /, /dev and /run are read-only; /tmp and /dev/shm are its run home's, on the node's disk", async () => {
    // A tmpfs is memory no process is charged for: an agent that filled one would leave the OOM
    // killer the largest process to take, perhaps the node. On disk, a full disk refuses new runs.
    const plan = {
      write: ["/planted", "/dev/planted", "/run/planted", "/etc/planted", "/tmp/planted", "/dev/shm/planted"],
      device: ["/tmp", "/dev/shm", "$HOME", "/"],
    };
    const outcome = await warden.invoke("test", randomUUID(), { provider: "kimi", prompt: JSON.stringify(plan), workspace: "main" });
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
    const tail = (outcome as unknown as { result: { output_tail: string } }).result.output_tail;
    for (const target of ["/planted", "/dev/planted", "/run/planted", "/etc/planted"]) assert.equal(attempt(tail, `write ${target}`), "EROFS", `${target}:\n${tail}`);
    for (const target of ["/tmp/planted", "/dev/shm/planted"]) assert.equal(attempt(tail, `write ${target}`), "ok", tail);
    // /tmp and /dev/shm are on the file system of the run's home (its directories), not the root's tmpfs.
    const homeDevice = attempt(tail, "device $HOME");
    assert.match(homeDevice, /^\d+$/);
    assert.equal(attempt(tail, "device /tmp"), homeDevice);
    assert.equal(attempt(tail, "device /dev/shm"), homeDevice);
    assert.notEqual(attempt(tail, "device /"), homeDevice);
    // What they held went with the run's home.
    assert.deepEqual(fs.readdirSync(path.join(home, "run-homes")), []);
  });

  it("cannot reach the kernel's keyrings: keyctl, add_key and request_key answer ENOSYS (the node's session keyring is not the agent's)", async () => {
    // Namespaces do not separate keyrings: without the filter, the agent keeps the session keyring
    // of the node that started it (the unconfined run below shows the calls answering).
    const outcome = await warden.invoke("test", randomUUID(), { provider: "kimi", prompt: JSON.stringify({ keyring: true }), workspace: "main" });
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
    const tail = (outcome as unknown as { result: { output_tail: string } }).result.output_tail;
    assert.ok(!attempt(tail, "keyring keyctl").startsWith("not attempted"), `this test needs python3 at /usr/bin/python3 (Debian package python3): ${tail}`);
    for (const call of ["keyctl", "add_key", "request_key"]) assert.equal(attempt(tail, `keyring ${call}`), "ENOSYS", tail);
    const started = Buffer.from(await warden.readJournal((outcome as unknown as { audit: { run_id: string } }).audit.run_id)).toString("utf8").split("\n")[0]!;
    assert.deepEqual((JSON.parse(started) as { entry: { event: { isolation: { profile: { seccomp?: unknown } } } } }).entry.event.isolation.profile.seccomp, { deny: ["add_key", "keyctl", "request_key"], errno: "ENOSYS" });
  });

  it("cannot make user namespaces of its own (where most of the kernel's attack surface opens to an unprivileged process)", { skip: probeSandbox("/usr/bin/bwrap").disableUserns === true ? false : "this bubblewrap has no --disable-userns (0.8 and later)" }, async () => {
    const outcome = await warden.invoke("test", randomUUID(), { provider: "kimi", prompt: JSON.stringify({ userns: true }), workspace: "main" });
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
    const tail = (outcome as unknown as { result: { output_tail: string } }).result.output_tail;
    const got = attempt(tail, "userns");
    assert.ok(!got.startsWith("not attempted"), `this test needs python3 at /usr/bin/python3 (Debian package python3): ${tail}`);
    // The unconfined run below makes one: the refusal is the sandbox's doing.
    assert.match(got, /^(ENOSPC|EPERM|EUSERS)$/, `the agent made a user namespace: ${tail}`);
    const started = Buffer.from(await warden.readJournal((outcome as unknown as { audit: { run_id: string } }).audit.run_id)).toString("utf8").split("\n")[0]!;
    assert.equal((JSON.parse(started) as { entry: { event: { isolation: { profile: { no_nested_user_namespaces?: unknown } } } } }).entry.event.isolation.profile.no_nested_user_namespaces, true);
  });

  it("a run configured unconfined says so in its journal, and journal verify warns", async () => {
    const plain = await openWarden({
      home: path.join(root, "home-none"),
      workspaces: { main: ws },
      providers: { kimi: { command: HOSTILE, promptArgs: ["--", "{prompt}"] } },
      isolation: "none",
    });
    let runId: string;
    try {
      const outcome = await plain.invoke("test", randomUUID(), { provider: "kimi", prompt: JSON.stringify({ keyring: true, userns: true }), workspace: "main" });
      assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
      // Unconfined, the keyring calls answer: the confined run's ENOSYS is the sandbox's doing.
      const tail = (outcome as unknown as { result: { output_tail: string } }).result.output_tail;
      assert.match(attempt(tail, "keyring keyctl"), /^\d+$/, tail);
      assert.equal(attempt(tail, "userns"), "ok", tail);
      runId = (outcome as unknown as { audit: { run_id: string } }).audit.run_id;
      fs.writeFileSync(path.join(root, "none.jsonl"), await plain.readJournal(runId));
    } finally {
      await plain.close();
    }
    const verified = await cli(["journal", "verify", path.join(root, "none.jsonl"), "--home", path.join(root, "home-none")]);
    assert.equal(verified.code, 0, verified.stderr);
    assert.match(verified.stdout, /^WARNING: isolation none: the agent ran unconfined/m);
  });

  it("an agent killed by a signal inside the sandbox leaves its run unresolved, as unconfined", async () => {
    const outcome = await warden.invoke("test", randomUUID(), { provider: "claude", prompt: "work #kill", workspace: "main" });
    assert.equal(outcome.status, "unresolved", JSON.stringify(outcome));
    const done = await warden.invoke("test", randomUUID(), { provider: "claude", prompt: "work", workspace: "main" });
    assert.equal(done.status, "recorded", JSON.stringify(done));
  });

  it("a workspace that is, holds or lies inside the node's home is refused at start", async () => {
    const parent = path.join(root, "h2");
    const home2 = path.join(parent, "home");
    fs.mkdirSync(path.join(home2, "inner"), { recursive: true, mode: 0o700 });
    fs.chmodSync(parent, 0o700);
    fs.symlinkSync(home2, path.join(root, "link-to-home"));
    for (const dir of [home2, path.join(home2, "inner"), parent, path.join(root, "link-to-home")]) {
      await assert.rejects(
        openWarden({ home: home2, workspaces: { w: dir } }).then((w) => w.close()),
        (e: { code?: string }) => e.code === "workspace-overlaps-home",
        dir,
      );
    }
  });
});
