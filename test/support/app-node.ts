/**
 * A real node for server tests: a temp home with the embedded backend, the fastify app over it
 * (driven with `inject`), fixture agents as providers and two tokens (operator, observer).
 */
import * as fs from "node:fs";
import { after, before } from "node:test";
import { Writable } from "node:stream";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { compileDirectory, type CompiledBundle } from "../../src/delivery/compile/directory.js";
import { fullBundleFiles } from "../providers/helpers.js";
import { hashToken } from "../../src/config/tokens.js";
import type { ServerSettings } from "../../src/config/serve-config.js";
import { createServer, type CreateServerOptions } from "../../src/server/app.js";
import type { App } from "../../src/server/context.js";
import { openWarden, type Warden, type WardenOptions } from "../../src/warden/facade.js";
import { tempDir } from "./temp.js";

export const AGENTS = fileURLToPath(new URL("../fixtures/agents/", import.meta.url));
export const OPERATOR_TOKEN = "operator-token-for-tests-0123456789";
export const OBSERVER_TOKEN = "observer-token-for-tests-0123456789";
export const OPERATOR = { authorization: `Bearer ${OPERATOR_TOKEN}` };
export const OBSERVER = { authorization: `Bearer ${OBSERVER_TOKEN}` };

export interface TestNode {
  readonly root: string;
  readonly home: string;
  readonly workspace: string;
  readonly startsFile: string;
  readonly warden: Warden;
  readonly app: App;
  close(): Promise<void>;
}

export interface TestNodeOptions {
  readonly settings?: Partial<ServerSettings>;
  readonly warden?: Partial<WardenOptions>;
  readonly server?: CreateServerOptions;
}

export async function openTestNode(root: string, options: TestNodeOptions = {}): Promise<TestNode> {
  const home = path.join(root, "home");
  const workspace = path.join(root, "workspace");
  fs.mkdirSync(workspace, { recursive: true });
  const startsFile = path.join(root, "starts.log");
  const warden = await openWarden({
    home,
    workspaces: { main: workspace },
    providers: {
      claude: { command: path.join(AGENTS, "claude.mjs") },
      codex: { command: path.join(AGENTS, "codex.mjs") },
      kimi: { command: path.join(AGENTS, "kimi.mjs") },
    },
    agentEnv: { PATH: process.env.PATH, WARDEN_FIXTURE_STARTS: startsFile },
    // watched from outside (pids, a starts file beside the workspace): unconfined by explicit choice
    isolation: "none",
    killGraceMs: 200,
    ...options.warden,
  });
  const app = await createServer(warden, {
    tokens: [
      { name: "alice", role: "operator", hash: hashToken(OPERATOR_TOKEN) },
      { name: "bob", role: "observer", hash: hashToken(OBSERVER_TOKEN) },
    ],
    maxWaitS: 30,
    jsonBodyBytes: 256 * 1024,
    logLevel: "silent",
    ...options.settings,
  }, { checkReplies: true, ...options.server });
  await app.ready();
  return {
    root,
    home,
    workspace,
    startsFile,
    warden,
    app,
    async close() {
      await app.close();
      await warden.close({ graceMs: 2000 });
    },
  };
}

/**
 * One node for every test of the enclosing describe: opened in a temp dir by its before hook,
 * closed and removed by its after hook. The answer stands for the node; read it inside tests.
 */
export function useTestNode(area: string, options: TestNodeOptions = {}): TestNode {
  let root: string | undefined;
  let opened: TestNode | undefined;
  before(async () => {
    const dir = tempDir(area);
    root = dir;
    opened = await openTestNode(dir, options);
  });
  after(async () => {
    await opened?.close();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });
  const node = (): TestNode => {
    if (opened === undefined) throw new Error(`the ${area} test node is opened by a before hook: use it inside a test`);
    return opened;
  };
  return {
    get root() {
      return node().root;
    },
    get home() {
      return node().home;
    },
    get workspace() {
      return node().workspace;
    },
    get startsFile() {
      return node().startsFile;
    },
    get warden() {
      return node().warden;
    },
    get app() {
      return node().app;
    },
    close: () => node().close(),
  };
}

/** Writes the providers tests' full bundle (two skills, plugin manifests, .mcp.json) to a dir and compiles it. */
export async function compileTestBundle(root: string, bundleId = "review-tools", revision = "r1", extra: Record<string, string> = {}): Promise<CompiledBundle> {
  const dir = fs.mkdtempSync(path.join(root, "bundle-"));
  for (const f of fullBundleFiles()) writeFile(dir, f.path, f.content);
  for (const [rel, content] of Object.entries(extra)) writeFile(dir, rel, content);
  return compileDirectory(dir, { bundleId, revision });
}

function writeFile(dir: string, rel: string, content: string | Uint8Array): void {
  fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  fs.writeFileSync(path.join(dir, rel), content);
}

export function contentOf(bundle: CompiledBundle, digest: string): Buffer {
  const file = bundle.files.find((f) => f.component.blob.digest === digest);
  if (file === undefined) throw new Error(`no file with digest ${digest}`);
  return fs.readFileSync(file.absolutePath);
}

export function chunkHeaders(offset: number): Record<string, string> {
  return { ...OPERATOR, "content-type": "application/octet-stream", "upload-offset": String(offset) };
}

/** begin → upload every missing blob in one chunk → commit, through the HTTP routes. */
export async function pushThroughApp(app: App, bundle: CompiledBundle): Promise<Record<string, unknown>> {
  const begun = json((await app.inject({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: bundle.manifest })).payload);
  if (begun.committed === true) return begun.receipt as Record<string, unknown>;
  const missing = begun.missing as { digest: string; offset: number }[];
  for (const m of missing) {
    const res = await app.inject({
      method: "PATCH",
      url: `/v1/stages/${begun.stage_id as string}/blobs/${m.digest}`,
      headers: chunkHeaders(m.offset),
      payload: contentOf(bundle, m.digest).subarray(m.offset),
    });
    if (res.statusCode !== 204) throw new Error(`chunk refused: ${res.payload}`);
  }
  const committed = await app.inject({ method: "POST", url: `/v1/stages/${begun.stage_id as string}/commit`, headers: OPERATOR });
  if (committed.statusCode !== 200) throw new Error(`commit refused: ${committed.payload}`);
  return json(committed.payload).receipt as Record<string, unknown>;
}

export function starts(file: string): number {
  return fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean).length : 0;
}

export function json(payload: string): Record<string, unknown> {
  return JSON.parse(payload) as Record<string, unknown>;
}

/** Everything a refused request must leave as it was: catalog, claims, blob/stage/journal files. */
export async function storedState(node: TestNode): Promise<string> {
  const bundles = (await node.app.inject({ url: "/v1/bundles", headers: OPERATOR })).payload;
  const invocations = (await node.app.inject({ url: "/v1/invocations", headers: OPERATOR })).payload;
  const files: string[] = [];
  const walk = (dir: string): void => {
    if (!fs.existsSync(dir)) return;
    for (const name of fs.readdirSync(dir).sort()) {
      const p = path.join(dir, name);
      const st = fs.lstatSync(p);
      if (st.isDirectory()) walk(p);
      else files.push(`${path.relative(node.home, p)}:${st.size}`);
    }
  };
  for (const sub of ["delivery/blobs", "delivery/stages", "journals"]) walk(path.join(node.home, sub));
  return JSON.stringify({ bundles, invocations, files });
}

/** A stream for a node's log that keeps what was written, for a test to read back. */
export function logSink(): { readonly stream: Writable; text(): string } {
  let logged = "";
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged += chunk.toString("utf8");
      done();
    },
  });
  return { stream, text: () => logged };
}
