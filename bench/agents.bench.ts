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
 * Needs `npm run build` first (bin/warden.cjs runs dist/).
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ScriptedModelServer } from "../src/scripted-model/index.js";
import { codexConfigToml } from "../src/providers/codex-config.js";
import { DEFAULT_PROVIDER_PROFILES, expandPromptArgs, expandRunLaunch } from "../src/providers/profiles.js";
import { cleanEnv, repo, startNode } from "../test/support/node.js";
import { AS_LAUNCHED_ENV, benchDir, fmt, median } from "./baseline.js";

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
  for (const d of [workspace, agentHome, codexHome]) mkdirSync(d, { recursive: true });
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
      workspaces: { main: workspace },
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
    return timed(commands[p], [...expandPromptArgs(profile, PROMPT), ...launch.args], { cwd: workspace, env: cleanEnv({ ...baseEnv, ...launch.env, ...env }) });
  };
  const viaWarden = (p: Provider): Promise<number> =>
    timed(process.execPath, [cli, "invoke", "--id", randomUUID(), "--provider", p, "--wait", "120", "--", PROMPT], {
      cwd: root,
      env: cleanEnv({ WARDEN_URL: node.url, WARDEN_TOKEN: TOKEN }),
    });
  // The same run through the HTTP API alone: what the node adds, without the CLI client's start.
  const viaHttp = async (p: Provider): Promise<number> => {
    const started = performance.now();
    const res = await fetch(`${node.url}/v1/invocations`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", "idempotency-key": randomUUID(), prefer: "wait=60" },
      body: JSON.stringify({ provider: p, prompt: PROMPT }),
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
  } finally {
    await node.kill();
    await model.close();
  }
}
