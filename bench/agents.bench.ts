/**
 * Agents bench (issue 23): what warden adds to a real CLI run. For claude and codex, the wall
 * time of `warden invoke` (the compiled CLI, bin/warden.cjs, as users run it, against a running
 * `warden serve`) of a one-turn scripted session, against the same CLI run directly with the
 * same arguments and environment against the same scripted model server, in alternating rounds
 * of the same run (medians). warden's share: the invoke client's start, the claim, the journal
 * (signed, fsynced), the materialized CODEX_HOME, the output capture and the recorded result.
 * The same run through the HTTP API alone (no CLI client process) splits that into what the node
 * adds and what starting the `warden` client costs.
 *
 * Confinement (issue 29): the same claude run through the HTTP API in a confined workspace (the
 * default: bubblewrap, egress through the node's proxy) against an unconfined one (`isolation:
 * "none"`) of the same node, alternating; and a 10 MiB streamed model answer read by a client
 * inside a real sandbox through the bridge and the egress proxy, against the same client reading
 * it directly (throughput from the first byte, and the whole request); and, in the same rounds,
 * the floor the design can reach: the same answer through two plain Node TCP relays outside any
 * sandbox (one in this process, as the proxy is in the node's, one in a process of its own, as
 * the bridge is), which is what two Node hops cost on this machine before warden adds anything.
 *
 * WARDEN_BENCH_CGROUPS=0 runs the node with `sandbox.cgroups: false`: what a confined run's
 * control groups add is the confined figure's difference between the two.
 *
 * Needs `npm run build` first (bin/warden.cjs runs dist/).
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { closeSync, existsSync, mkdirSync, openSync, rmSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import { join } from "node:path";
import { ScriptedModelServer } from "../src/scripted-model/index.js";
import { codexConfigToml } from "../src/providers/codex-config.js";
import { DEFAULT_PROVIDER_PROFILES, expandLaunchArgs, expandRunLaunch } from "../src/providers/profiles.js";
import { cleanEnv, repo, startNode } from "../test/support/node.js";
import { AS_LAUNCHED_ENV, benchDir, fmt, median } from "./baseline.js";
import { Confinement } from "../src/sandbox/confinement.js";
import { RUN_SHM_DIR, RUN_TMP_DIR } from "../src/sandbox/profile.js";

const TOKEN = "bench-agents-operator-token-0123456789abcdef";
const KEY_VAR = "SCRIPTED_MODEL_KEY";
const ROUNDS = 5;
const TARGET = 1.2;
const PROMPT = "say hello";
const PROVIDERS = ["claude", "codex"] as const;
type Provider = (typeof PROVIDERS)[number];

/** Runs a command to its end; resolves with its wall time in ms, rejects on a non-zero exit. */
function timed(command: string, args: readonly string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<number> {
  const started = performance.now();
  const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (out += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (out += s));
  return new Promise((resolve, reject) =>
    child.once("close", (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`${command} exited ${code}: ${out.slice(-2000)}`)))),
  );
}

export default async function (): Promise<void> {
  const cli = join(repo, "bin", "warden.cjs");
  if (!existsSync(join(repo, "dist"))) throw new Error("run `npm run build` first: the bench runs bin/warden.cjs");
  const root = benchDir("agents");
  const workspace = join(root, "workspace");
  const agentHome = join(root, "agent-home");
  const codexHome = join(root, "codex-home");
  const open = join(root, "open");
  for (const d of [workspace, agentHome, codexHome, open]) mkdirSync(d, { recursive: true });
  const model = await ScriptedModelServer.start({ script: { turns: [] } });
  const endpoint = (p: Provider): { baseUrl: string; apiKeyEnv: string; name: string } => ({
    baseUrl: p === "claude" ? model.url : `${model.url}/v1`,
    apiKeyEnv: KEY_VAR,
    name: "scripted-model",
  });
  const commands: Record<Provider, string> = { claude: join(repo, "node_modules", ".bin", "claude"), codex: join(repo, "node_modules", ".bin", "codex") };
  const baseEnv = { [KEY_VAR]: "sk-scripted", HOME: agentHome, XDG_CONFIG_HOME: join(agentHome, ".config") };
  const node = await startNode({
    home: join(root, "home"),
    config: {
      workspaces: { main: workspace, open },
      defaultWorkspace: "main",
      workspaceIsolation: { open: "none" },
      ...(process.env.WARDEN_BENCH_CGROUPS === "0" ? { sandbox: { cgroups: false } } : {}),
      providers: Object.fromEntries(PROVIDERS.map((p) => [p, { command: commands[p], model: endpoint(p) }])),
      logLevel: "warn",
    },
    env: { ...AS_LAUNCHED_ENV, ...baseEnv, WARDEN_TOKEN: TOKEN },
    timeoutMs: 60_000,
  });
  // The direct run gets what warden gives the CLI: the same arguments, environment and, for codex,
  // the same config.toml in a CODEX_HOME of its own.
  writeFileSync(join(codexHome, "config.toml"), codexConfigToml({ model: endpoint("codex") }));
  const direct = (p: Provider): Promise<number> => {
    const profile = DEFAULT_PROVIDER_PROFILES[p];
    const launch = expandRunLaunch(profile, profile.permission);
    const env: Record<string, string> =
      p === "claude"
        ? { ANTHROPIC_BASE_URL: model.url, ANTHROPIC_MODEL: "scripted-model", ANTHROPIC_API_KEY: "sk-scripted" }
        : { CODEX_HOME: codexHome };
    return timed(commands[p], expandLaunchArgs(profile, PROMPT, launch.args), { cwd: workspace, env: cleanEnv({ ...baseEnv, ...launch.env, ...env }) });
  };
  const viaWarden = (p: Provider): Promise<number> =>
    timed(process.execPath, [cli, "invoke", "--id", randomUUID(), "--provider", p, "--wait", "120", "--", PROMPT], {
      cwd: root,
      env: cleanEnv({ WARDEN_URL: node.url, WARDEN_TOKEN: TOKEN }),
    });
  // The same run through the HTTP API alone: what the node adds, without the CLI client's start.
  const viaHttp = async (p: Provider, ws = "main"): Promise<number> => {
    const started = performance.now();
    const res = await fetch(`${node.url}/v1/invocations`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", "idempotency-key": randomUUID(), prefer: "wait=60" },
      body: JSON.stringify({ provider: p, prompt: PROMPT, workspace: ws }),
    });
    const body = (await res.json()) as { status?: string };
    if (res.status !== 200 || body.status !== "recorded") throw new Error(`POST /v1/invocations: ${res.status} ${JSON.stringify(body)}`);
    return performance.now() - started;
  };
  try {
    for (const p of PROVIDERS) {
      const w: number[] = [];
      const d: number[] = [];
      const h: number[] = [];
      // One warm-up each (the CLI's first start reads its binary from disk), then alternating rounds.
      model.load({ turns: [{ text: "hello" }, { text: "hello" }] });
      await direct(p);
      await viaWarden(p);
      for (let i = 0; i < ROUNDS; i++) {
        model.load({ turns: [{ text: "hello" }] });
        d.push(await direct(p));
        model.load({ turns: [{ text: "hello" }] });
        w.push(await viaWarden(p));
        model.load({ turns: [{ text: "hello" }] });
        h.push(await viaHttp(p));
      }
      const ratio = median(w) / median(d);
      console.log(
        `${p}: warden invoke ${fmt(median(w))} ms vs the CLI run directly ${fmt(median(d))} ms = ${ratio.toFixed(2)}x ` +
          `(target <= ${TARGET}x: ${ratio <= TARGET ? "met" : "NOT met"}); warden adds ${fmt(median(w) - median(d))} ms (medians of ${ROUNDS})`,
      );
      console.log(
        `${p}: the same run through the HTTP API alone ${fmt(median(h))} ms = ${(median(h) / median(d)).toFixed(2)}x; ` +
          `the node adds ${fmt(median(h) - median(d))} ms, the CLI client's own start ${fmt(median(w) - median(h))} ms`,
      );
    }
    // Confined against unconfined: the same node, the same CLI, the same scripted model.
    const confined: number[] = [];
    const unconfined: number[] = [];
    model.load({ turns: [{ text: "hello" }, { text: "hello" }] });
    await viaHttp("claude", "main");
    await viaHttp("claude", "open");
    for (let i = 0; i < ROUNDS; i++) {
      model.load({ turns: [{ text: "hello" }] });
      unconfined.push(await viaHttp("claude", "open"));
      model.load({ turns: [{ text: "hello" }] });
      confined.push(await viaHttp("claude", "main"));
    }
    const cRatio = median(confined) / median(unconfined);
    console.log(
      `claude confined ${fmt(median(confined))} ms vs unconfined ${fmt(median(unconfined))} ms = ${cRatio.toFixed(3)}x ` +
        `(target <= 1.05x: ${cRatio <= 1.05 ? "met" : "NOT met"}); confinement adds ${fmt(median(confined) - median(unconfined))} ms (medians of ${ROUNDS}, HTTP API)`,
    );
  } finally {
    await node.kill();
    await model.close();
  }
  await egressThroughput(root, workspace);
}

const STREAM_BYTES = 10 * 1024 * 1024;

/** A client reading one streamed answer: through the proxy variables when set, else directly. */
const CLIENT = String.raw`
const http = require("node:http");
const url = new URL(process.argv[1]);
const proxy = process.env.HTTP_PROXY ? new URL(process.env.HTTP_PROXY) : null;
const options = proxy ? { host: proxy.hostname, port: proxy.port, path: url.href, headers: { host: url.host } } : { host: url.hostname, port: url.port, path: url.pathname };
const t0 = performance.now();
http.get(options, (res) => {
  let bytes = 0, first;
  res.on("data", (d) => { first ??= performance.now(); bytes += d.length; });
  res.on("end", () => { const t = performance.now(); process.stdout.write(JSON.stringify({ bytes, streamMs: t - first, totalMs: t - t0 })); });
});
`;

export async function egressThroughput(root: string, workspace: string): Promise<void> {
  // The model endpoint is a process of its own, as a real one is (not in the node's event loop).
  const server = spawn(process.execPath, ["-e", STREAM_SERVER, String(STREAM_BYTES)], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<string>((resolve, reject) => {
    server.stdout.setEncoding("utf8").once("data", (s: string) => resolve(s.trim()));
    server.once("exit", (code) => reject(new Error(`the stream server exited ${code}`)));
  });
  const url = `http://127.0.0.1:${port}/stream`;
  const homes = join(root, "homes");
  const confinement = new Confinement({ runsDir: join(root, "runs"), homesDir: homes });
  const planned = confinement.plan({ isolation: "sandbox", workspaceId: "main", workspace, readOnly: false, command: process.execPath, modelUrl: url, envNames: ["PATH"] });
  const read = (out: string): { bytes: number; streamMs: number; totalMs: number } => {
    const r = JSON.parse(out) as { bytes: number; streamMs: number; totalMs: number };
    if (r.bytes !== STREAM_BYTES) throw new Error(`read ${r.bytes} bytes of ${STREAM_BYTES}`);
    return r;
  };
  const run = (command: string, args: readonly string[], env: Record<string, string>, fd3?: string): Promise<string> => {
    // A confined run's seccomp program goes to bubblewrap on fd 3, as the runner hands it (agent-process.ts).
    const program = fd3 === undefined ? undefined : openSync(fd3, "r");
    const child = spawn(command, args, { cwd: workspace, env, stdio: program === undefined ? ["ignore", "pipe", "pipe"] : ["ignore", "pipe", "pipe", program] });
    if (program !== undefined) closeSync(program);
    let out = "";
    let err = "";
    child.stdout!.setEncoding("utf8").on("data", (s: string) => (out += s));
    child.stderr!.setEncoding("utf8").on("data", (s: string) => (err += s));
    return new Promise((resolve, reject) => child.once("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}: ${err}`)))));
  };
  // The node's journal is not in this measure: the proxy's entries go to memory.
  const journal = { append: async (): Promise<boolean> => true };
  const viaProxy = async (): Promise<{ bytes: number; streamMs: number; totalMs: number }> => {
    const runId = randomUUID();
    // The run home is the runner's to write (providers/run-home.ts); the sandbox binds it, and its
    // tmp and shm directories at /tmp and /dev/shm.
    for (const dir of [RUN_TMP_DIR, RUN_SHM_DIR]) mkdirSync(join(homes, runId, dir), { recursive: true, mode: 0o700 });
    const launched = await confinement.launch(planned, runId, journal, process.execPath, ["-e", CLIENT, url], workspace);
    try {
      return read(await run(launched.command, launched.args, { PATH: process.env.PATH ?? "/usr/bin:/bin", ...launched.env }, launched.seccomp));
    } finally {
      await launched.drain();
      launched.remove();
      rmSync(join(homes, runId), { recursive: true, force: true });
    }
  };
  const direct = async (): Promise<{ bytes: number; streamMs: number; totalMs: number }> => read(await run(process.execPath, ["-e", CLIENT, url], { PATH: process.env.PATH ?? "/usr/bin:/bin" }));
  // The floor: client -> relay (own process) -> relay (this process) -> server, plain TCP.
  const near = pipeRelay(Number(port));
  const nearPort = await new Promise<number>((resolve) => near.listen(0, "127.0.0.1", () => resolve((near.address() as net.AddressInfo).port)));
  const far = spawn(process.execPath, ["-e", RELAY, String(nearPort)], { stdio: ["ignore", "pipe", "inherit"] });
  const farPort = await new Promise<string>((resolve, reject) => {
    far.stdout.setEncoding("utf8").once("data", (s: string) => resolve(s.trim()));
    far.once("exit", (code) => reject(new Error(`the relay exited ${code}`)));
  });
  const floorUrl = `http://127.0.0.1:${farPort}/stream`;
  const viaRelays = async (): Promise<{ bytes: number; streamMs: number; totalMs: number }> =>
    read(await run(process.execPath, ["-e", CLIENT, floorUrl], { PATH: process.env.PATH ?? "/usr/bin:/bin" }));
  try {
    await direct();
    await viaRelays();
    await viaProxy();
    const d: { streamMs: number; totalMs: number }[] = [];
    const f: { streamMs: number; totalMs: number }[] = [];
    const p: { streamMs: number; totalMs: number }[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      d.push(await direct());
      f.push(await viaRelays());
      p.push(await viaProxy());
    }
    const mibps = (ms: number): number => STREAM_BYTES / (1024 * 1024) / (ms / 1000);
    const dStream = median(d.map((x) => x.streamMs));
    const fStream = median(f.map((x) => x.streamMs));
    const pStream = median(p.map((x) => x.streamMs));
    const ratio = mibps(pStream) / mibps(dStream);
    const floor = mibps(fStream) / mibps(dStream);
    console.log(
      `10 MiB streamed answer: through the sandbox's bridge and the egress proxy ${fmt(mibps(pStream))} MiB/s vs direct ${fmt(mibps(dStream))} MiB/s = ${ratio.toFixed(2)}x ` +
        `(target >= 0.9x: ${ratio >= 0.9 ? "met" : "NOT met"}); whole request ${fmt(median(p.map((x) => x.totalMs)))} ms vs ${fmt(median(d.map((x) => x.totalMs)))} ms (medians of ${ROUNDS})`,
    );
    console.log(
      `  floor, two plain Node TCP relays outside any sandbox: ${fmt(mibps(fStream))} MiB/s = ${floor.toFixed(2)}x direct` +
        `${floor < 0.9 ? " (the 0.9x target is above what two Node hops give on this machine)" : ""}; the proxy path reaches ${(ratio / floor).toFixed(2)}x of the floor; ` +
        `whole request ${fmt(median(f.map((x) => x.totalMs)))} ms`,
    );
  } finally {
    server.kill();
    far.kill();
    near.close();
  }
}

/** A relay with nothing of warden's: every connection piped to `port` on loopback, both ways. */
function pipeRelay(port: number): net.Server {
  return net.createServer({ allowHalfOpen: true }, (a) => {
    const b = net.connect({ host: "127.0.0.1", port, allowHalfOpen: true });
    const drop = (): void => {
      a.destroy();
      b.destroy();
    };
    a.on("error", drop);
    b.on("error", drop);
    a.on("close", drop);
    b.on("close", drop);
    a.pipe(b);
    b.pipe(a);
  });
}

/** The same relay as a process of its own, listening on an ephemeral port it prints; argv: <port to reach>. */
const RELAY = String.raw`
const net = require("node:net");
const to = Number(process.argv[1]);
const server = net.createServer({ allowHalfOpen: true }, (a) => {
  const b = net.connect({ host: "127.0.0.1", port: to, allowHalfOpen: true });
  const drop = () => { a.destroy(); b.destroy(); };
  a.on("error", drop); b.on("error", drop); a.on("close", drop); b.on("close", drop);
  a.pipe(b);
  b.pipe(a);
});
server.listen(0, "127.0.0.1", () => process.stdout.write(server.address().port + "\n"));
`;

/** Serves `argv[1]` bytes of event stream per request; prints its port. */
const STREAM_SERVER = String.raw`
const http = require("node:http");
const total = Number(process.argv[1]);
const chunk = Buffer.alloc(64 * 1024, "data: token token token token\n");
const server = http.createServer((_req, res) => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  let sent = 0;
  const more = () => {
    while (sent < total) {
      sent += chunk.length;
      if (!res.write(chunk)) return void res.once("drain", more);
    }
    res.end();
  };
  more();
});
server.listen(0, "127.0.0.1", () => process.stdout.write(server.address().port + "\n"));
`;
