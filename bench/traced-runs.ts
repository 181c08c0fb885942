/**
 * Tracing on against off (issue 33, DESIGN.md "Traces"), part of the invocations bench: whole runs
 * through the library facade (claim, signed journal, the fixture claude agent spawned unconfined,
 * one tool call, the recorded result) at a fixed concurrency, on two nodes opened in this process —
 * one tracing, exporting over OTLP/HTTP to a receiver in a process of its own on loopback, one not —
 * in alternating rounds (medians), so both see the same moments of a shared machine.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { openWarden, type Warden } from "../src/warden/facade.js";
import { fixtureAgents } from "../test/support/node.js";
import { fmt, median, ratioLine } from "./baseline.js";

const ROUNDS = 9;
const RUNS_PER_ROUND = 24;
const CONCURRENCY = 8;
const TARGET = 0.95;

/** An OTLP/HTTP endpoint that takes every export (200) and keeps nothing: the collector's cost is not ours. */
const RECEIVER = `
const http = require("node:http");
let spans = 0;
const server = http.createServer((req, res) => {
  let n = 0;
  req.on("data", (c) => (n += c.length));
  req.on("end", () => { spans += n; res.writeHead(200, { "content-type": "application/json" }).end("{}"); });
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
process.on("SIGTERM", () => { console.error(spans); process.exit(0); });
`;

async function startReceiver(): Promise<{ child: ChildProcess; url: string; bytes(): Promise<number> }> {
  const child = spawn(process.execPath, ["-e", RECEIVER], { stdio: ["ignore", "pipe", "pipe"] });
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout!.setEncoding("utf8").once("data", (s: string) => resolve(s.trim()));
    child.once("exit", (code) => reject(new Error(`the OTLP receiver exited ${code}`)));
  });
  return {
    child,
    url: `http://127.0.0.1:${port}/v1/traces`,
    bytes: () =>
      new Promise((resolve) => {
        let err = "";
        child.stderr!.setEncoding("utf8").on("data", (s: string) => (err += s));
        child.once("exit", () => resolve(Number(err.trim())));
        child.kill("SIGTERM");
      }),
  };
}

async function open(root: string, name: string, traced: boolean): Promise<Warden> {
  const home = join(root, name);
  const workspace = join(root, `${name}-workspace`);
  mkdirSync(workspace, { recursive: true });
  return openWarden({
    home,
    workspaces: { main: workspace },
    isolation: "none",
    providers: { claude: { command: join(fixtureAgents, "claude.mjs") } },
    // The switch is the environment's, read when the node opens (tracing.ts).
    ...(traced ? { traces: { version: "bench" } } : { traces: false }),
    retentionIntervalMs: 3_600_000,
  });
}

interface Round {
  /** runs per second of wall time */
  readonly perSec: number;
  /** CPU of this process (the node: every thread) per run, µs; the agents' own processes are not in it */
  readonly cpuUs: number;
}

/** RUNS_PER_ROUND runs, CONCURRENCY at a time; every run must be recorded. */
async function round(warden: Warden): Promise<Round> {
  let next = 0;
  const cpu = process.cpuUsage();
  const started = performance.now();
  const worker = async (): Promise<void> => {
    while (next < RUNS_PER_ROUND) {
      next++;
      const outcome = await warden.invoke("bench", randomUUID(), { provider: "claude", prompt: "say hello" });
      if (outcome.status !== "recorded") throw new Error(`a bench run ended ${outcome.status}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const wallS = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  return { perSec: RUNS_PER_ROUND / wallS, cpuUs: (used.user + used.system) / RUNS_PER_ROUND };
}

export async function tracedRuns(root: string): Promise<void> {
  const receiver = await startReceiver();
  let on: Warden | undefined;
  let off: Warden | undefined;
  try {
    process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = receiver.url;
    try {
      on = await open(root, "traced", true);
    } finally {
      delete process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
    }
    off = await open(root, "untraced", false);
    // A warm-up round each: the first spawns pay for cold caches.
    await round(off);
    await round(on);
    const offs: Round[] = [];
    const ons: Round[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      // Each goes first in every other round: neither always runs after the other's leftovers.
      if (i % 2 === 0) {
        offs.push(await round(off));
        ons.push(await round(on));
      } else {
        ons.push(await round(on));
        offs.push(await round(off));
      }
    }
    await on.close();
    on = undefined;
    const bytes = await receiver.bytes();
    if (!(bytes > 0)) throw new Error("the traced node sent the receiver nothing");
    const rate = (rs: readonly Round[]): number => median(rs.map((r) => r.perSec));
    const cpu = (rs: readonly Round[]): number => median(rs.map((r) => r.cpuUs));
    console.log(
      ratioLine(`runs with tracing on (OTLP/HTTP to a loopback receiver), concurrency ${CONCURRENCY}`, rate(ons), rate(offs), "runs/s", TARGET) +
        `  [median of ${ROUNDS} alternating rounds of ${RUNS_PER_ROUND} runs; on ${ons.map((r) => fmt(r.perSec, 1)).join(", ")}; off ${offs.map((r) => fmt(r.perSec, 1)).join(", ")}; ` +
        `paired rounds' ratios ${ons.map((r, i) => (r.perSec / offs[i]!.perSec).toFixed(2)).join(", ")}; ${fmt(bytes)} bytes of OTLP/JSON received]`,
    );
    console.log(
      `  the node's CPU per run (every thread of this process; the agents' processes not counted): on ${fmt(cpu(ons))} µs vs off ${fmt(cpu(offs))} µs = ${(cpu(ons) / cpu(offs)).toFixed(2)}x (medians)`,
    );
  } finally {
    await on?.close().catch(() => undefined);
    await off?.close().catch(() => undefined);
    if (receiver.child.exitCode === null) receiver.child.kill("SIGKILL");
  }
}
