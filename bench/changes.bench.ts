/**
 * Change sets (issue 30, "Measure"): what warden adds to a run on a git workspace — its worktree
 * and its change set — on a generated repository of 10,000 files (about 100 MB) where the run
 * changed 50 (modified, added, deleted). Warden's side is the runner's own code path
 * (RunWorktrees: add, record = compute + store, remove); the baseline is what one would run by
 * hand on the same repository in the same run: `git worktree add --detach`, `git diff --binary`,
 * `git worktree remove`. Rounds alternate so the machine's drift falls on both sides alike.
 *
 * `git diff --binary` alone leaves out untracked files, so a second baseline stages them first
 * (`git add -A`, then `git diff --cached --binary`): the least git needs to print the same patch
 * warden stores. The target (<= 1.2x) is against the first, the bare one.
 */
import { spawn } from "node:child_process";
import { randomUUID, createHash } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { RunWorktrees } from "../src/changes/run-worktrees.js";
import { benchDir, fmt, keepUntilRunEnds, median } from "./baseline.js";

const FILES = 10_000;
const FILE_BYTES = 10_000;
const MODIFIED = 20;
const ADDED = 20;
const DELETED = 10;
const ROUNDS = Number(process.env.WARDEN_BENCH_CHANGES_ROUNDS ?? 7);

const GIT_ENV = {
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  LC_ALL: "C",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "bench",
  GIT_AUTHOR_EMAIL: "bench@localhost",
  GIT_COMMITTER_NAME: "bench",
  GIT_COMMITTER_EMAIL: "bench@localhost",
};

function sh(args: readonly string[], cwd: string, input?: Uint8Array): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn("git", args, { cwd, env: GIT_ENV, stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (c: Buffer) => out.push(c));
    child.stderr.on("data", (c: Buffer) => err.push(c));
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`git ${args.join(" ")} exited ${code}: ${Buffer.concat(err).toString()}`))));
    child.stdin.on("error", () => undefined);
    child.stdin.end(input ?? "");
  });
}

/** Text-like content of `bytes` bytes, distinct per seed (git compresses it about as it would source). */
function content(seed: string, bytes: number): Buffer {
  const lines: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const line = `${i} ${createHash("sha256").update(`${seed}:${i}`).digest("hex")} const value${i} = compute(${i});\n`;
    lines.push(line);
    size += line.length;
  }
  return Buffer.from(lines.join("")).subarray(0, bytes);
}

const pathOf = (i: number): string => `src/m${String(i % 100).padStart(2, "0")}/file${String(i).padStart(5, "0")}.ts`;

/** The repository, written once by `git fast-import` and checked out: the workspace a node would be given. */
async function generateRepo(dir: string): Promise<string> {
  const repo = join(dir, "repo");
  fs.mkdirSync(repo);
  await sh(["init", "--quiet", "--initial-branch=main"], repo);
  const parts: Buffer[] = [Buffer.from(`commit refs/heads/main\ncommitter bench <bench@localhost> 1700000000 +0000\ndata 4\nbase\n`)];
  for (let i = 0; i < FILES; i++) {
    const data = content(`f${i}`, FILE_BYTES);
    parts.push(Buffer.from(`M 100644 inline ${pathOf(i)}\ndata ${data.length}\n`), data, Buffer.from("\n"));
  }
  await sh(["fast-import", "--quiet"], repo, Buffer.concat(parts));
  await sh(["reset", "--hard", "--quiet", "main"], repo);
  return repo;
}

/** What the run does in its tree (not timed): 20 files modified, 20 added, 10 deleted. */
function change(tree: string): void {
  for (let i = 0; i < MODIFIED; i++) {
    const p = join(tree, pathOf(i * 37));
    fs.appendFileSync(p, `// changed by the run ${i}\n`);
  }
  for (let i = 0; i < ADDED; i++) {
    const p = join(tree, "new", `added${i}.ts`);
    fs.mkdirSync(join(tree, "new"), { recursive: true });
    fs.writeFileSync(p, content(`added${i}`, FILE_BYTES));
  }
  for (let i = 0; i < DELETED; i++) fs.rmSync(join(tree, pathOf(5000 + i * 13)));
}

interface Round {
  add: number;
  diff: number;
  remove: number;
  total: number;
}

async function wardenRound(rw: RunWorktrees, repo: string): Promise<Round> {
  const planned = await rw.plan(repo, undefined);
  if (planned === undefined) throw new Error("the bench's repository is not a git workspace");
  const runId = randomUUID();
  const t0 = performance.now();
  const wt = await rw.add(planned, runId);
  const t1 = performance.now();
  change(wt.path);
  const t2 = performance.now();
  const { event } = await rw.record(wt, planned.base);
  const t3 = performance.now();
  await rw.remove(wt);
  const t4 = performance.now();
  if (!("change_set" in event) || event.files.length !== MODIFIED + ADDED + DELETED) throw new Error(`warden's change set is not the run's 50 files: ${JSON.stringify(event).slice(0, 300)}`);
  return { add: t1 - t0, diff: t3 - t2, remove: t4 - t3, total: t1 - t0 + (t4 - t2) };
}

async function handRound(repo: string, dir: string, stage: boolean): Promise<Round> {
  const wt = join(dir, `hand-${randomUUID()}`);
  const t0 = performance.now();
  await sh(["worktree", "add", "--detach", "--quiet", wt, "HEAD"], repo);
  const t1 = performance.now();
  change(wt);
  const t2 = performance.now();
  let patch: Buffer;
  if (stage) {
    await sh(["add", "-A"], wt);
    patch = await sh(["diff", "--cached", "--binary", "HEAD"], wt);
  } else {
    patch = await sh(["diff", "--binary", "HEAD"], wt);
  }
  const t3 = performance.now();
  await sh(["worktree", "remove", "--force", wt], repo);
  const t4 = performance.now();
  if (patch.length === 0) throw new Error("the hand-run git diff printed nothing");
  return { add: t1 - t0, diff: t3 - t2, remove: t4 - t3, total: t1 - t0 + (t4 - t2) };
}

function line(label: string, rounds: readonly Round[]): string {
  const m = (k: keyof Round): string => fmt(median(rounds.map((r) => r[k])), 0).padStart(6);
  return `${label.padEnd(52)} total ${m("total")} ms = worktree add ${m("add")} + change set ${m("diff")} + remove ${m("remove")} (medians, n=${rounds.length})`;
}

export default async function main(): Promise<void> {
  const dir = keepUntilRunEnds(benchDir("changes"));
  const g0 = performance.now();
  const repo = await generateRepo(dir);
  const size = (await sh(["count-objects", "-v"], repo)).toString().match(/size-pack: (\d+)/)?.[1];
  console.log(`repository: ${FILES} files of ${FILE_BYTES} bytes (${fmt((FILES * FILE_BYTES) / 1e6)} MB checked out, ${size ?? "?"} KiB packed), generated in ${fmt(performance.now() - g0)} ms; the run changes ${MODIFIED} modified + ${ADDED} added + ${DELETED} deleted`);
  const rw = new RunWorktrees(join(dir, "home"));
  const warden: Round[] = [];
  const bare: Round[] = [];
  const staged: Round[] = [];
  // One warm-up of each: the first checkout reads the pack cold.
  await handRound(repo, dir, false);
  await wardenRound(rw, repo);
  for (let i = 0; i < ROUNDS; i++) {
    // Alternate which goes first, so neither always follows the other's clean-up.
    const order = i % 2 === 0 ? ["warden", "bare", "staged"] : ["staged", "bare", "warden"];
    for (const who of order) {
      if (who === "warden") warden.push(await wardenRound(rw, repo));
      else if (who === "bare") bare.push(await handRound(repo, dir, false));
      else staged.push(await handRound(repo, dir, true));
    }
  }
  console.log(line("warden (RunWorktrees: add, record, remove)", warden));
  console.log(line("by hand: worktree add, git diff --binary, remove", bare));
  console.log(line("by hand: worktree add, add -A + diff --cached, remove", staged));
  const w = median(warden.map((r) => r.total));
  const b = median(bare.map((r) => r.total));
  const s = median(staged.map((r) => r.total));
  console.log(`warden against worktree add + git diff --binary + remove: ${(w / b).toFixed(2)}x (target <= 1.2x: ${w / b <= 1.2 ? "met" : "NOT met"})`);
  console.log(`warden against the same with the untracked files staged (the same patch): ${(w / s).toFixed(2)}x`);
}
