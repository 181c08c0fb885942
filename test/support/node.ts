/**
 * Child processes for client, CLI and end-to-end tests: the real `warden serve` on a free
 * loopback port with a temp home, and the real `warden` CLI. Nothing is simulated: the node is
 * the CLI users run (`cliCommand` below).
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createServer, type AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { tempDir } from "./temp.js";
import { READY_MS } from "./wait.js";
import "./exit-on-signal.js";

export const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const cliEntry = join(repo, "src", "cli", "run.ts");
/** What `npx warden` runs: the launcher of the compiled CLI (dist/). */
export const wardenBin = join(repo, "bin", "warden.cjs");
/**
 * Node's arguments that start the CLI, before the CLI's own. Under scripts/run-tests.mjs, which
 * compiles src/ into dist/ first when dist/ is older and then says so (WARDEN_TEST_CLI=dist):
 * bin/warden.cjs, as `npx warden` starts it. A node started through tsx instead costs about twice
 * the CPU (every module, a worker thread's too, goes through tsx's loader), and the suite starts
 * hundreds on two cores. Anywhere else (a test file run on its own, a bench): src/cli/run.ts
 * through tsx, which has no build to be out of date.
 */
export const cliCommand: readonly string[] = process.env.WARDEN_TEST_CLI === "dist" ? [wardenBin] : ["--import", "tsx", cliEntry];
export const fixtureAgents = join(repo, "test", "fixtures", "agents");

/**
 * The environment of every child: nothing inherited that could point it at another node; a node
 * it starts checks each reply against its response schema (WARDEN_CHECK_REPLIES), unless the
 * process says otherwise: `npm run bench` sets it to 0 so its nodes run as operators run them.
 */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const { WARDEN_HOME: _h, WARDEN_URL: _u, WARDEN_TOKEN: _t, WARDEN_OBSERVER_TOKEN: _o, ...env } = process.env;
  return { ...env, WARDEN_CHECK_REPLIES: process.env.WARDEN_CHECK_REPLIES ?? "1", ...extra };
}

export interface NodeProcess {
  readonly url: string;
  readonly home: string;
  readonly token: string;
  readonly child: ChildProcess;
  /** the temp directory startNode made for the home (none when the caller named the home) */
  readonly tempRoot: string | undefined;
  /** everything the node printed on stdout so far */
  stdout(): string;
  stderr(): string;
  /** SIGTERM and wait for the exit code */
  stop(): Promise<number | null>;
  /** Waits for the exit code, sending nothing (a second SIGTERM would end a stopping node at once, 143). */
  exited(): Promise<number | null>;
  /** SIGKILL (no shutdown at all) and wait */
  kill(): Promise<void>;
}

export interface StartNodeOptions {
  /** state directory (default: a new temp dir, removed by `removeHome`) */
  readonly home?: string;
  /** extra `warden serve` arguments (--workspace, --provider …) */
  readonly args?: readonly string[];
  readonly env?: Record<string, string>;
  /** written as `<home>/warden.json` before the node starts */
  readonly config?: Record<string, unknown>;
  /** how long to wait for the first line (default READY_MS, generous for a busy machine) */
  readonly timeoutMs?: number;
  /** Node's own flags for the child, before the CLI (a bench's `--cpu-prof`, which NODE_OPTIONS refuses) */
  readonly nodeFlags?: readonly string[];
}

/**
 * The nodes startNode started and their temp homes, until stopped and removed: a test process
 * that ends early (a cancelled test skips its `after` hooks) kills and removes them on exit.
 */
const liveChildren = new Set<ChildProcess>();
const liveTempRoots = new Set<string>();
process.on("exit", () => {
  for (const child of liveChildren) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  for (const root of liveTempRoots) rmSync(root, { recursive: true, force: true });
});

const URL_RE = /https?:\/\/[^\s"']+/;

/** Starts `warden serve --listen 127.0.0.1:0` and resolves once its first stdout line names its URL. */
export function startNode(options: StartNodeOptions = {}): Promise<NodeProcess> {
  const tempRoot = options.home === undefined ? tempDir("node") : undefined;
  if (tempRoot !== undefined) liveTempRoots.add(tempRoot);
  const home = options.home ?? join(tempRoot!, "home");
  // Over what the test already wrote there (a restart keeps its settings).
  const configFile = join(home, "warden.json");
  const written = existsSync(configFile) ? (JSON.parse(readFileSync(configFile, "utf8")) as Record<string, unknown>) : {};
  const config = { ...written, ...fixtureWatching(options.env), ...options.config };
  if (JSON.stringify(config) !== JSON.stringify(written)) {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    writeFileSync(join(home, "warden.json"), JSON.stringify(config), { mode: 0o600 });
  }
  const child = spawn(process.execPath, [...(options.nodeFlags ?? []), ...cliCommand, "serve", "--home", home, "--listen", "127.0.0.1:0", ...(options.args ?? [])], {
    cwd: repo,
    env: cleanEnv(options.env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (s: string) => (out += s));
  child.stderr!.setEncoding("utf8").on("data", (s: string) => (err += s));
  liveChildren.add(child);
  const exited = new Promise<number | null>((done) =>
    child.once("exit", (code) => {
      liveChildren.delete(child);
      done(code);
    }),
  );
  const waitMs = options.timeoutMs ?? READY_MS;
  return new Promise((resolveStart, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`warden serve printed no first line naming its URL within ${waitMs / 1000} s (it neither listened nor exited)\nstdout: ${out}\nstderr: ${err}`));
    }, waitMs);
    const onData = (): void => {
      const firstLine = out.split("\n", 1)[0]!;
      if (!out.includes("\n")) return;
      const match = URL_RE.exec(firstLine);
      clearTimeout(timer);
      child.stdout!.off("data", onData);
      if (match === null) {
        child.kill("SIGKILL");
        reject(new Error(`warden serve's first line names no URL: ${firstLine}`));
        return;
      }
      const token = options.env?.WARDEN_TOKEN ?? readFileSync(join(home, "token"), "utf8").trim();
      resolveStart({
        url: match[0].replace(/[.,;]$/, ""),
        home,
        token,
        child,
        tempRoot,
        stdout: () => out,
        stderr: () => err,
        exited: () => exited,
        stop: async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
          return exited;
        },
        kill: async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
          await exited;
        },
      });
    };
    child.stdout!.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`warden serve exited (${code}) before printing its URL\nstdout: ${out}\nstderr: ${err}`));
    });
  });
}

/** Removes the temp home startNode made; a home the caller named is the caller's to remove. */
export function removeHome(node: NodeProcess | undefined): void {
  if (node?.tempRoot === undefined) return;
  rmSync(node.tempRoot, { recursive: true, force: true });
  liveTempRoots.delete(node.tempRoot);
}

export interface CliRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface CliOptions {
  readonly env?: Record<string, string>;
  readonly cwd?: string;
}

/** Runs the real `warden` CLI to its end. */
export function warden(args: readonly string[], options: CliOptions = {}): Promise<CliRun> {
  const child = spawn(process.execPath, [...cliCommand, ...args], {
    cwd: options.cwd ?? repo,
    env: cleanEnv(options.env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  return new Promise((done) => child.once("close", (code, signal) => done({ code, signal, stdout, stderr })));
}

/** The value of an unlabelled Prometheus counter or the sum over all its label sets. */
export function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (match !== null && match[1] === name) sum += Number(match[3]);
  }
  return sum;
}

/** A loopback port nothing listens on (bound, then released): connecting to it is refused. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const port = (server.address() as AddressInfo).port;
  await new Promise((done) => server.close(done));
  return port;
}

export interface HttpReply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** the parsed JSON body, or {} when the body is not JSON (ndjson, SSE, metrics, empty) */
  readonly body: Record<string, unknown>;
}

export interface HttpCallOptions {
  /** bearer token; undefined → the caller's default, null → no Authorization header */
  readonly token?: string | null;
  readonly headers?: Record<string, string>;
  /** sent as JSON (content-type application/json unless the headers name another) */
  readonly body?: unknown;
  /** sent as is */
  readonly raw?: string | Uint8Array;
}

/** One raw HTTP request to a node, for tests that check statuses, headers and problem bodies. */
export async function httpCall(url: string, defaultToken: string, method: string, route: string, options: HttpCallOptions = {}): Promise<HttpReply> {
  const token = options.token === undefined ? defaultToken : options.token;
  const headers: Record<string, string> = { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...options.headers };
  let body: string | Uint8Array | undefined = options.raw;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await fetch(`${url}${route}`, { method, headers, ...(body === undefined ? {} : { body }) });
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return { status: res.status, headers: res.headers, text, body: parsed };
}

/**
 * A test that hands the fixture agents a file or gate of its own (WARDEN_FIXTURE_*) watches them
 * from outside: their pids and files beside the workspace. Such a node runs them unconfined, by
 * explicit configuration, with those variables passed on (agents get only allowlisted names);
 * confinement has its own tests (test/security/sandbox*.test.ts).
 */
function fixtureWatching(env: Record<string, string> | undefined): Record<string, unknown> {
  const names = Object.keys(env ?? {}).filter((n) => n.startsWith("WARDEN_FIXTURE_"));
  return names.length === 0 ? {} : { isolation: "none", agentEnv: names };
}

/** A run's journal as the node serves it (`GET /v1/runs/{id}/journal`), one parsed entry per line. */
export async function runJournal<Entry>(url: string, token: string, runId: string): Promise<Entry[]> {
  const reply = await fetch(`${url}/v1/runs/${runId}/journal`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(reply.status, 200, `GET /v1/runs/${runId}/journal`);
  return (await reply.text()).split("\n").filter(Boolean).map((l) => JSON.parse(l) as Entry);
}

/** Fails unless the node's own verification of the run (`GET /v1/runs/{id}/verification`) is ok. */
export async function assertRunVerified(url: string, token: string, runId: string): Promise<void> {
  const v = await httpCall(url, token, "GET", `/v1/runs/${runId}/verification`);
  assert.equal(v.status, 200);
  assert.equal(v.body.ok, true, JSON.stringify(v.body));
}
