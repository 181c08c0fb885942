/**
 * README.md's walkthrough, run as pasted: its shell blocks are taken from the README itself, the
 * first (`warden serve`) in the background as terminal 1, the others in one shell as terminal 2,
 * from the repository's root. Only `npx warden` is resolved by the test (to this checkout's CLI,
 * as npx does, without npx's copy into ~/.npm) and `$TMPDIR` points at a temp dir of the test.
 * It keeps the README true: a step that stops working, or a walkthrough that leaves a file in the
 * repository, fails here.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, readFileSync, readdirSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { cleanEnv, cliCommand, repo } from "../support/node.js";
import { signalChildGroup } from "../support/processes.js";
import { waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

const SECTION = "## Five-minute walkthrough";

/** The `sh` blocks of the walkthrough section, in order. */
export function walkthroughBlocks(readme: string): string[] {
  const start = readme.indexOf(`\n${SECTION}\n`);
  assert.notEqual(start, -1, `README.md has a "${SECTION}" section`);
  const rest = readme.slice(start + SECTION.length + 2);
  const end = rest.search(/^## /m);
  const section = end === -1 ? rest : rest.slice(0, end);
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

/** Output of the terminal-2 script, cut at the markers the test put between the blocks. */
function splitByBlock(output: string, count: number): string[] {
  const parts: string[] = [];
  for (let i = 0; i < count; i++) {
    const from = output.indexOf(`@@block ${i}@@\n`);
    assert.notEqual(from, -1, `block ${i} ran:\n${output}`);
    const to = output.indexOf(`@@block ${i + 1}@@\n`);
    parts.push(output.slice(from, to === -1 ? undefined : to));
  }
  return parts;
}

/**
 * `git status --porcelain`, ignored files included (a stray `.warden/` is ignored by git, not by
 * this test); the build's own outputs are left out, which another test may be writing meanwhile.
 */
function gitStatus(): string {
  const r = spawnSync("git", ["status", "--porcelain", "--ignored"], { cwd: repo, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout
    .split("\n")
    .filter((line) => !/^!! (dist|node_modules)\//.test(line))
    .join("\n");
}

const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

test("README.md is one page: at most 12 KiB", () => {
  const bytes = readFileSync(join(repo, "README.md")).byteLength;
  assert.ok(bytes <= 12 * 1024, `README.md is ${bytes} bytes: move detail into docs/`);
});

test("README walkthrough: every step runs as pasted and leaves nothing in the repository", async (t) => {
  const blocks = walkthroughBlocks(readFileSync(join(repo, "README.md"), "utf8"));
  assert.ok(blocks.length >= 4, `the walkthrough has its blocks (${blocks.length})`);
  const [serveBlock, ...terminal2] = blocks;
  assert.match(serveBlock!, /warden serve/, "the first block serves");
  const cleanup = terminal2.pop()!;
  assert.match(cleanup, /rm -rf \$WARDEN_DEMO/, "the last block removes what the walkthrough made");

  const root = tempDir("readme");
  const tmp = join(root, "tmp");
  const bin = join(root, "bin");
  mkdirSync(tmp);
  mkdirSync(bin);
  // npx runs a package's own bin from its checkout; this is that (cliCommand: bin/warden.cjs under
  // the test runner), minus npx's copy into ~/.npm. The CLI itself gets the real temp dir back,
  // where tsx keeps its compile cache when it runs through tsx.
  writeFileSync(
    join(bin, "npx"),
    `#!/bin/sh\nif [ "$1" = warden ]; then shift; TMPDIR="${tmpdir()}" exec "${process.execPath}" ${cliCommand.map((a) => `"${a}"`).join(" ")} "$@"; fi\necho "npx: only 'npx warden' is expected here, not: npx $*" >&2\nexit 127\n`,
  );
  chmodSync(join(bin, "npx"), 0o755);
  const { WARDEN_DEMO: _demo, ...inherited } = cleanEnv({ TMPDIR: tmp, PATH: `${bin}:${process.env.PATH ?? ""}` });
  const env = inherited as NodeJS.ProcessEnv;
  const demo = join(tmp, "warden-demo");

  const before = gitStatus();
  let serve: ChildProcess | undefined;
  t.after(() => {
    if (serve !== undefined) signalChildGroup(serve, "SIGKILL");
    rmSync(root, { recursive: true, force: true });
  });

  // Terminal 1.
  serve = spawn("bash", ["-c", serveBlock!], { cwd: repo, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  let serveOut = "";
  let serveErr = "";
  serve.stdout!.setEncoding("utf8").on("data", (s: string) => (serveOut += s));
  serve.stderr!.setEncoding("utf8").on("data", (s: string) => (serveErr += s));
  const serveExit = new Promise<[number | null, NodeJS.Signals | null]>((done) => serve!.once("exit", (code, signal) => done([code, signal])));
  await waitFor(
    "the walkthrough's `warden serve` to print its `warden listening on` line",
    () => (/^warden listening on http:\/\/127\.0\.0\.1:\d+$/m.test(serveOut) ? true : serve!.exitCode !== null ? false : undefined),
    180_000,
  ).then((up) => assert.ok(up, `warden serve exited early:\n${serveOut}\n${serveErr}`));
  assert.match(serveErr, /operator token was written to .*warden-demo\/home\/token/);

  // Terminal 2: one shell reading the blocks as typed, kept open until the node is stopped.
  const terminal = spawn("bash", [], { cwd: repo, env, stdio: ["pipe", "pipe", "pipe"] });
  let output = "";
  terminal.stdout.setEncoding("utf8").on("data", (s: string) => (output += s));
  terminal.stderr.setEncoding("utf8").on("data", (s: string) => (output += s));
  const terminalExit = new Promise<number | null>((done) => terminal.once("exit", (c) => done(c)));
  t.after(() => terminal.kill("SIGKILL"));
  terminal.stdin.write(
    [...terminal2.flatMap((block, i) => [`echo "@@block ${i}@@"`, block]), 'echo "@@vars ID=$ID RUN=$RUN KILLED=$KILLED@@"', ""].join("\n"),
  );
  await waitFor("the walkthrough's terminal-2 steps to finish", () => (/@@vars .*@@\n/.test(output) ? true : undefined), 600_000);
  const out = splitByBlock(output, terminal2.length);
  const vars = /@@vars ID=(\S*) RUN=(\S*) KILLED=(\S*)@@/.exec(output);
  assert.ok(vars !== null, output);
  const [, id, run, killed] = vars;
  assert.match(id!, new RegExp(`^${UUID}$`));
  assert.match(killed!, new RegExp(`^${UUID}$`));
  assert.match(run!, new RegExp(`^${UUID}$`), "the run id was read from `invocations show --json`");

  // Only one step fails, the one that is meant to: the crashed run answers `unresolved`.
  const failures = output.split("\n").filter((l) => l.startsWith("warden: ") || /command not found|No such file/.test(l));
  assert.equal(failures.length, 1, `one failing step:\n${failures.join("\n")}`);
  assert.match(failures[0]!, /\(unresolved\)$/);

  const find = (re: RegExp): string => {
    const hit = out.find((o) => re.test(o));
    assert.ok(hit !== undefined, `some step printed ${re}:\n${output}`);
    return hit;
  };
  // Only what a step is for is checked, not how the CLI lays it out.
  // Push, re-push, list.
  const push = find(/committed review-bundle@/);
  assert.match(push, /^committed review-bundle@[0-9a-f]{12}$/m);
  assert.match(push, /already committed/);
  assert.match(push, /^review-bundle\b/m);
  // Two invokes, one run: the second is a replay of the first.
  const invoke = find(new RegExp(`api:operator ${id}`));
  assert.equal(invoke.split(run!).length - 1, 2, `both answers carry run ${run}:\n${invoke}`);
  assert.equal(invoke.match(/replayed/gi)?.length, 1, "the second answer is a replay");
  // The journal verifies.
  assert.match(find(/entries verified/), new RegExp(`^OK ${run}: \\d+ entries verified`, "m"));
  // The crashed run: listed as unresolved, inspected, its review written with the evidence's digest.
  const crash = find(new RegExp(`^unresolved +api:operator ${killed}`, "m"));
  assert.match(crash, /snapshot[ _]hash\W+sha256:[0-9a-f]{64}/);
  const notes = readFileSync(join(demo, "notes.txt"));
  const review = JSON.parse(readFileSync(join(demo, "review.json"), "utf8")) as { outcome: string; effects_stopped: boolean; evidence: { sha256: string }[] };
  assert.equal(review.outcome, "no_effects");
  assert.equal(review.effects_stopped, true);
  assert.deepEqual(
    review.evidence.map((e) => e.sha256),
    [`sha256:${createHash("sha256").update(notes).digest("hex")}`],
  );
  // Reconciled, and shown so.
  const closed = find(new RegExp(`^reconciled api:operator ${killed}`, "m"));
  assert.ok(closed.split("no_effects").length - 1 >= 2, `the receipt and the invocation say no_effects:\n${closed}`);

  // Ctrl-C in terminal 1: a graceful stop.
  assert.equal(signalChildGroup(serve, "SIGINT"), true, "warden serve still runs");
  const [code, signal] = await serveExit;
  assert.deepEqual([code, signal], [0, null], `warden serve stopped cleanly:\n${serveErr}`);
  assert.equal(existsSync(join(demo, "home", "node.json")), false);

  // The last block removes everything the walkthrough made.
  terminal.stdin.end(`${cleanup}\nexit $?\n`);
  assert.equal(await terminalExit, 0, output);
  assert.deepEqual(readdirSync(tmp), [], "nothing is left in $TMPDIR");
  assert.equal(gitStatus(), before, "the repository is as it was");
});
