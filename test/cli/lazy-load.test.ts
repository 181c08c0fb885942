/**
 * The CLI loads only what the command it runs needs (src/cli/main.ts): `--version`, `--help` and
 * every client command run as real child processes with a module-loader hook that records each
 * module they load, against a real `warden serve`. None may load SQLite, pg, fastify, the runner,
 * the server or a backend; `--version` not even the client. And the CLI asks a real node once for
 * an answer that only an operator can change (503 provider-unavailable), instead of retrying it.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { spawn } from "node:child_process";
import { cleanEnv, cliEntry, removeHome, repo, startNode, type CliRun, type NodeProcess } from "../support/node.js";
import { tempDir } from "../support/temp.js";

const recorder = pathToFileURL(join(repo, "test", "cli", "fixtures", "record-loads.mjs")).href;

/** What no client command needs: each pattern is matched against every loaded module's URL. */
const HEAVY: readonly RegExp[] = [
  /\/node_modules\/better-sqlite3\//,
  /\/node_modules\/pg\//,
  /\/node_modules\/fastify\//,
  /\/src\/runner\//,
  /\/src\/server\//,
  /\/src\/backends\//,
  /\/src\/warden\.ts$/,
];
/** The schemas: only `push` compiles a manifest. */
const SCHEMAS = /\/node_modules\/typebox\//;

interface Loaded extends CliRun {
  readonly modules: readonly string[];
}

/** Runs the CLI (as the harness does: tsx over src/) with the recorder, and returns what it loaded. */
function wardenRecorded(args: readonly string[], env: Record<string, string>, dir: string): Promise<Loaded> {
  const log = join(dir, `loads-${randomUUID()}.txt`);
  writeFileSync(log, "");
  const child = spawn(process.execPath, ["--import", "tsx", "--import", recorder, cliEntry, ...args], {
    cwd: repo,
    env: cleanEnv({ ...env, WARDEN_TEST_LOAD_LOG: log }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  return new Promise((done) =>
    child.once("close", (code, signal) => done({ code, signal, stdout, stderr, modules: readFileSync(log, "utf8").split("\n").filter((l) => l !== "") })),
  );
}

function assertLight(run: Loaded, what: string, options: { schemas?: boolean } = {}): void {
  const heavy = run.modules.filter((m) => HEAVY.some((re) => re.test(m)) || (options.schemas !== true && SCHEMAS.test(m)));
  assert.deepEqual(heavy, [], `${what} loaded modules it does not need (exit ${run.code}; ${run.stderr})`);
}

function loaded(run: Loaded, suffix: string): boolean {
  return run.modules.some((m) => m.endsWith(suffix));
}

describe("the CLI loads only what a command needs", () => {
  let node: NodeProcess;
  let dir: string;
  let env: Record<string, string>;

  before(async () => {
    dir = tempDir("lazy-load");
    // A provider whose command does not exist on this node: invoke answers 503 provider-unavailable.
    node = await startNode({ args: ["--provider", `claude=${join(dir, "no-such-claude")}`] });
    env = { WARDEN_HOME: node.home };
  });
  after(async () => {
    await node?.stop();
    removeHome(node);
    rmSync(dir, { recursive: true, force: true });
  });

  it("--version loads neither the commands nor the client", async () => {
    const run = await wardenRecorded(["--version"], env, dir);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^\d+\.\d+\.\d+\n$/);
    assertLight(run, "--version");
    // The recorder sees the CLI's own modules: main is there, no command and no client.
    assert.ok(loaded(run, "/src/cli/main.ts"), "the recorder saw the CLI load");
    assert.deepEqual(run.modules.filter((m) => /\/src\/(client\/client|client\/transport|cli\/commands\/)/.test(m)), []);
  });

  it("--help lists every command, loading only their registrations", async () => {
    const run = await wardenRecorded(["--help"], env, dir);
    assert.equal(run.code, 0, run.stderr);
    for (const command of ["serve", "push", "bundles", "invoke", "invocations", "inspect", "reconcile", "journal"]) assert.match(run.stdout, new RegExp(`^  ${command}\\b`, "m"));
    assert.ok(loaded(run, "/src/cli/commands/serve.ts"));
    assertLight(run, "--help");
    assert.ok(!loaded(run, "/src/client/client.ts"), "help needs no client");
  });

  it("client commands against a running node load the client and nothing heavy", async () => {
    const bundle = join(dir, "bundle");
    mkdirSync(join(bundle, "skills", "hello"), { recursive: true });
    writeFileSync(join(bundle, "skills", "hello", "SKILL.md"), "---\nname: hello\ndescription: says hello\n---\nSay hello.\n");
    const runs: [readonly string[], number, { schemas?: boolean }?][] = [
      [["bundles"], 0],
      [["bundles", "--json"], 0],
      [["invocations"], 0],
      [["invocations", "show", "default", randomUUID()], 1],
      [["inspect", "default", randomUUID()], 1],
      [["journal", "verify", randomUUID()], 1],
      [["push", bundle, "--bundle-id", "hello", "--no-progress"], 0, { schemas: true }],
      [["bundles", "show", "hello"], 0],
    ];
    for (const [args, code, options] of runs) {
      const run = await wardenRecorded(args, env, dir);
      assert.equal(run.code, code, `warden ${args.join(" ")}: ${run.stdout}${run.stderr}`);
      assert.ok(loaded(run, "/src/client/client.ts"), `warden ${args.join(" ")} talked to the node through the client`);
      assertLight(run, `warden ${args.join(" ")}`, options);
    }
  });

  it("invoke is refused at once with provider-unavailable, asked once, loading nothing heavy", async () => {
    const before = await postInvocations503(node);
    const run = await wardenRecorded(["invoke", "--provider", "claude", "--id", randomUUID(), "say hello"], env, dir);
    assert.equal(run.code, 1, run.stdout + run.stderr);
    assert.match(run.stderr, /^warden: .*\(provider-unavailable\)\n$/);
    assertLight(run, "warden invoke");
    assert.equal((await postInvocations503(node)) - before, 1, "the node was asked exactly once: a missing provider CLI does not go away by asking again");
  });
});

/** How many POST /v1/invocations the node answered 503, from its /metrics. */
async function postInvocations503(node: NodeProcess): Promise<number> {
  const text = await (await fetch(`${node.url}/metrics`, { headers: { authorization: `Bearer ${node.token}` } })).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("warden_http_requests_total{") && line.includes('method="POST"') && line.includes('route="/v1/invocations"') && line.includes('status="503"')) {
      sum += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return sum;
}
