/**
 * CLI start-up (issue 19 "A CLI that answers at once"), all through the built launcher
 * (bin/warden.cjs → dist/, so run `npm run build` first), in alternating rounds against a bare
 * `node -e 0` measured in the same rounds (medians):
 *   1. `warden --version`                   target ≤ 1.5x node -e 0
 *   2. `warden bundles` against a running node   target ≤ 2.5x node -e 0
 *   3. `warden serve`, from spawn to its listening line, on an empty home (restarted) and on a
 *      home with 10⁶ recorded claims and 10⁴ committed bundles: start-up must not grow with claims.
 *
 * The big home is built once through the stores' own bulk paths (claims: EmbeddedClaimStore
 * .importRecorded, copies of one real recorded claim; bundles: the Delivery service in-process,
 * one small blob each), not through HTTP, and kept in the temp directory between runs
 * (WARDEN_BENCH_DIR or os.tmpdir(), `warden-bench-cli-home-v1`): it takes minutes to build.
 */
import { spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { openEmbeddedBackend } from "../src/backends/embedded/index.js";
import { openEmbeddedDelivery } from "../src/backends/embedded/delivery/delivery-backend.js";
import { sha256Digest } from "../src/core/digest.js";
import { resolveLimits } from "../src/core/limits.js";
import { createManifest } from "../src/delivery/manifest.js";
import { bundleDigestOf } from "../src/delivery/manifest-types.js";
import { Invocations, recordedCopies } from "../src/invocations/index.js";
import { benchDir, fmt, keepUntilRunEnds, median } from "./baseline.js";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..");
const launcher = join(repo, "bin", "warden.cjs");
const CLAIMS = 1_000_000;
const BUNDLES = 10_000;
const ROUNDS = 15;
const SERVE_ROUNDS = 5;
const BIG_HOME_VERSION = "v1";
const SCOPE = "bench";

/** Wall milliseconds of one run of `args` (node's own argv), which must exit 0. */
function timeRun(args: readonly string[], env: NodeJS.ProcessEnv): number {
  const start = performance.now();
  const run = spawnSync(process.execPath, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  const ms = performance.now() - start;
  if (run.status !== 0) throw new Error(`node ${args.join(" ")} exited ${run.status}: ${String(run.stderr)}`);
  return ms;
}

/** The environment of every child: no WARDEN_* of the caller's, and no compile cache of Node's own choosing. */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const { WARDEN_HOME: _h, WARDEN_URL: _u, WARDEN_TOKEN: _t, NODE_OPTIONS: _o, ...env } = process.env;
  return { ...env, ...extra };
}

interface Serving {
  readonly url: string;
  /** spawn → listening line, ms */
  readonly startMs: number;
  stop(): Promise<void>;
}

/** Starts `warden serve` on `home` and resolves once it printed its listening line. */
function serve(home: string): Promise<Serving> {
  const start = performance.now();
  const child = spawn(process.execPath, [launcher, "serve", "--home", home, "--listen", "127.0.0.1:0", "--log-level", "warn"], {
    env: childEnv(),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (err += s));
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`warden serve exited (${code}) before listening: ${err}`)));
    child.stdout.setEncoding("utf8").on("data", (s: string) => {
      out += s;
      const match = /warden listening on (\S+)\n/.exec(out);
      if (match === null) return;
      const startMs = performance.now() - start;
      resolve({
        url: match[1]!,
        startMs,
        stop: async () => {
          child.kill("SIGTERM");
          await exited;
        },
      });
    });
  });
}

/** A home with CLAIMS recorded claims and BUNDLES committed bundles, built once and kept. */
async function bigHome(): Promise<string> {
  const root = join(process.env.WARDEN_BENCH_DIR ?? tmpdir(), `warden-bench-cli-home-${BIG_HOME_VERSION}`);
  const home = join(root, "home");
  if (existsSync(join(root, "complete"))) return home;
  const started = performance.now();
  // The claims first (a run cut short after them resumes with the bundles, which are idempotent).
  if (!existsSync(join(root, "claims-complete"))) await buildClaims(root, home);
  const claimsSeconds = (performance.now() - started) / 1000;
  await buildBundles(home);
  writeFileSync(join(root, "complete"), `${CLAIMS} claims, ${BUNDLES} bundles\n`);
  console.log(`built ${home}: claims in ${claimsSeconds.toFixed(0)} s, ${fmt(BUNDLES)} bundles in ${((performance.now() - started) / 1000 - claimsSeconds).toFixed(0)} s (kept for later runs)`);
  return home;
}

async function buildClaims(root: string, home: string): Promise<void> {
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { mode: 0o700 });
  // A first start lays the home out as a node does (token, keys, backend record, directories).
  await (await serve(home)).stop();
  const backend = await openEmbeddedBackend({ home });
  try {
    const invocations = new Invocations({ claims: backend.claims, journals: backend.journals, keys: backend.keys, limits: backend.limits });
    const templateId = randomUUID();
    await invocations.run(SCOPE, templateId, { task: "bench" }, "bench", async () => ({ ok: true, text: "a small cached result" }));
    const template = await backend.claims.get({ scope: SCOPE, id: templateId });
    if (template === undefined) throw new Error("template claim missing");
    backend.claims.importRecorded(recordedCopies(template, CLAIMS - 1));
  } finally {
    await backend.close();
  }
  writeFileSync(join(root, "claims-complete"), `${CLAIMS}\n`);
}

/** BUNDLES bundles of one small file each, committed through the delivery service (a bundle committed before is answered as such). */
async function buildBundles(home: string): Promise<void> {
  const { delivery } = await openEmbeddedDelivery(home);
  try {
    const limits = resolveLimits();
    const one = async (i: number): Promise<void> => {
      const content = Buffer.from(`bundle ${i}\n`);
      const path = "data/readme.txt";
      const digest = sha256Digest(content);
      const manifest = createManifest(
        {
          bundle_id: `b${String(i).padStart(5, "0")}`,
          revision: "r1",
          bundle_digest: bundleDigestOf([{ path, content }]),
          components: [{ kind: "file", scope: "session", relative_path: path, blob: { digest, byte_len: content.byteLength } }],
        },
        limits,
      );
      const begun = await delivery.begin(manifest);
      if (begun.committed) return;
      for (const missing of begun.missing) await delivery.putChunk(begun.stage_id, missing.digest, 0, content);
      await delivery.commit(begun.stage_id);
    };
    let next = 0;
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (next < BUNDLES) await one(next++);
    }));
  } finally {
    await delivery.close();
  }
}

function verdict(ratio: number, target: number): string {
  return ratio <= target ? `(target <= ${target}x: met)` : `(target <= ${target}x: NOT met)`;
}

export default async function (): Promise<void> {
  if (!existsSync(join(repo, "dist", "src", "cli", "run.js"))) throw new Error("bench cli runs the built CLI: run `npm run build` first");
  console.log(`load average ${loadavg().map((l) => l.toFixed(1)).join(" ")} on this machine`);

  // 1 + 2: the client side, against a node on an empty home.
  const emptyHome = join(keepUntilRunEnds(benchDir("cli")), "home");
  const node = await serve(emptyHome);
  const bare: number[] = [];
  const version: number[] = [];
  const bundles: number[] = [];
  try {
    const env = childEnv({ WARDEN_HOME: emptyHome });
    timeRun([launcher, "bundles"], env); // a first run fills the page cache, as a user's second command finds it
    for (let round = 0; round < ROUNDS; round++) {
      bare.push(timeRun(["-e", "0"], env));
      version.push(timeRun([launcher, "--version"], env));
      bundles.push(timeRun([launcher, "bundles"], env));
    }
  } finally {
    await node.stop();
  }
  const base = median(bare);
  const v = median(version);
  const b = median(bundles);
  console.log(`node -e 0 (baseline): ${fmt(base)} ms  (median of ${ROUNDS} alternating rounds)`);
  console.log(`warden --version: ${fmt(v)} ms = ${(v / base).toFixed(2)}x node -e 0 ${verdict(v / base, 1.5)}`);
  console.log(`warden bundles (running node): ${fmt(b)} ms = ${(b / base).toFixed(2)}x node -e 0 ${verdict(b / base, 2.5)}`);

  // 3: serve, spawn to listening, on the empty home (a restart) and on the big one, alternating.
  const big = await bigHome();
  // One start of each first: it fills the page cache as a restart finds it, and brings the home's
  // schema up to date (a one-time migration is not a start's cost).
  for (const home of [emptyHome, big]) await (await serve(home)).stop();
  const emptyStarts: number[] = [];
  const bigStarts: number[] = [];
  const bareServe: number[] = [];
  for (let round = 0; round < SERVE_ROUNDS; round++) {
    bareServe.push(timeRun(["-e", "0"], childEnv()));
    for (const [home, into] of [[emptyHome, emptyStarts], [big, bigStarts]] as const) {
      const started = await serve(home);
      into.push(started.startMs);
      await started.stop();
    }
  }
  const serveBase = median(bareServe);
  const e = median(emptyStarts);
  const g = median(bigStarts);
  console.log(`warden serve, start to listening, empty home: ${fmt(e)} ms = ${(e / serveBase).toFixed(2)}x node -e 0 (${fmt(serveBase)} ms)  (median of ${SERVE_ROUNDS}: ${emptyStarts.map((x) => fmt(x)).join(", ")})`);
  console.log(
    `warden serve, start to listening, ${fmt(CLAIMS)} claims + ${fmt(BUNDLES)} bundles: ${fmt(g)} ms = ${(g / e).toFixed(2)}x the empty home  (median of ${SERVE_ROUNDS}: ${bigStarts.map((x) => fmt(x)).join(", ")})`,
  );
}
