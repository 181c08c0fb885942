/**
 * Invocation round trips over HTTP on the replay path (issue 6): a real `warden serve` child on
 * loopback, 16 invocations recorded once (fixture agent), then POST /v1/invocations with their
 * Idempotency-Keys at concurrency 64 over keep-alive connections (node:http Agent, maxSockets
 * 64). Every reply must be 200 + Idempotency-Replayed. Target: >= 5,000 round trips/s, p99 <
 * 20 ms. Baseline, same run, same node, same client: GET /healthz round trips/s (no auth, no
 * body, no store), so the ratio is what the replay path costs over bare HTTP on this machine.
 *
 * The client shares the machine's two cores with the node, so it does no more per request than
 * a keep-alive HTTP client must: request options (headers included) are built once per key, and
 * reply bodies are drained without being collected.
 */
import { randomUUID } from "node:crypto";
import * as http from "node:http";
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { availableParallelism, loadavg } from "node:os";
import { fixtureAgents, startNode } from "../test/support/node.js";
import { AS_LAUNCHED_ENV, benchDir, fmt, percentile, ratioLine } from "./baseline.js";

const TOKEN = "bench-operator-token-0123456789abcdef";
const CONCURRENCY = 64;
const KEYS = 16;
const WARMUP_S = 1;
const MEASURE_S = 5;
const BODY = JSON.stringify({ provider: "kimi", prompt: "bench replay" });

interface Target {
  readonly method: "GET" | "POST";
  readonly path: string;
  /** the headers of every request, cycled through (built once, before the clock starts) */
  readonly headers: readonly http.OutgoingHttpHeaders[];
  readonly body?: string;
  /** checks one reply; throws on anything but the expected answer */
  check(status: number, headers: http.IncomingHttpHeaders): void;
}

function request(options: http.RequestOptions, target: Target): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(options, (res) => {
      res.on("end", () => {
        try {
          target.check(res.statusCode ?? 0, res.headers);
          resolve();
        } catch (error) {
          reject(error instanceof Error ? error : new Error(String(error)));
        }
      });
      res.on("error", reject);
      res.resume();
    });
    req.on("error", reject);
    req.end(target.body);
  });
}

/** Round trips/s and latencies (ms) of `target` at CONCURRENCY for `seconds`. */
async function load(url: URL, target: Target, seconds: number): Promise<{ perSec: number; latencies: number[] }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const options: http.RequestOptions[] = target.headers.map((headers) => ({
    agent,
    host: url.hostname,
    port: url.port,
    method: target.method,
    path: target.path,
    headers,
  }));
  const latencies: number[] = [];
  let i = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  const worker = async (): Promise<void> => {
    while (performance.now() < end) {
      const t = performance.now();
      await request(options[i++ % options.length]!, target);
      latencies.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const elapsed = (performance.now() - start) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return { perSec: latencies.length / elapsed, latencies };
}

export default async function (): Promise<void> {
  const home = join(benchDir("http-invocations"), "home");
  const node = await startNode({
    home,
    args: ["--provider", `kimi=${join(fixtureAgents, "kimi.mjs")}`, "--log-level", "warn"],
    env: { ...AS_LAUNCHED_ENV, WARDEN_TOKEN: TOKEN },
  });
  try {
    const url = new URL(node.url);
    const keys = Array.from({ length: KEYS }, () => randomUUID());
    const auth = { authorization: `Bearer ${TOKEN}` };
    for (const key of keys) {
      const res = await fetch(`${node.url}/v1/invocations`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json", "idempotency-key": key, prefer: "wait=30" },
        body: BODY,
      });
      if (res.status !== 200) throw new Error(`seeding ${key}: ${res.status} ${await res.text()}`);
    }

    const health: Target = {
      method: "GET",
      path: "/healthz",
      headers: [{}],
      check: (status) => {
        if (status !== 200) throw new Error(`/healthz answered ${status}`);
      },
    };
    const replay: Target = {
      method: "POST",
      path: "/v1/invocations",
      body: BODY,
      headers: keys.map((key) => ({ ...auth, "content-type": "application/json", "idempotency-key": key, "content-length": Buffer.byteLength(BODY) })),
      check: (status, headers) => {
        if (status !== 200 || headers["idempotency-replayed"] !== "true") throw new Error(`replay answered ${status}`);
      },
    };

    await load(url, health, WARMUP_S);
    const baseline = await load(url, health, MEASURE_S);
    await load(url, replay, WARMUP_S);
    const measured = await load(url, replay, MEASURE_S);
    const p50 = percentile(measured.latencies, 50);
    const p99 = percentile(measured.latencies, 99);
    console.log(`machine: ${availableParallelism()} cores, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}; client and node share them`);
    console.log(ratioLine(`replay round trips/s over HTTP, c=${CONCURRENCY}`, measured.perSec, baseline.perSec, "req/s"));
    console.log(
      `  absolute: ${fmt(measured.perSec)} req/s (target >= 5,000: ${measured.perSec >= 5000 ? "met" : "NOT met"}); ` +
        `p50 ${p50.toFixed(2)} ms, p99 ${p99.toFixed(2)} ms (target < 20 ms: ${p99 < 20 ? "met" : "NOT met"}); ` +
        `baseline /healthz p99 ${percentile(baseline.latencies, 99).toFixed(2)} ms`,
    );
  } finally {
    await node.stop();
    rmSync(dirname(home), { recursive: true, force: true });
  }
}
