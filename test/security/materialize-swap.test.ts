/**
 * A process of the node's user racing materialization (DESIGN.md "Providers": materializations
 * are private and built under their root; G10: never follow a link). While warden builds a
 * session's temp tree, a child process swaps its `bundle/` directory for a symlink to a victim
 * directory outside the materializations root that already holds the same subdirectories (as
 * `~/.claude/skills/...` would). Writes that go by path (`<temp>/bundle/skills/review/SKILL.md`)
 * then land in the victim; writes that go by descriptor land in the directory warden created,
 * wherever it was moved.
 *
 * Real timing, many rounds: the assertion holds in every round whatever the interleaving. Each
 * round must either succeed with its tree under the root, or fail with a typed error (a WardenError
 * and its code); nothing outside the root may ever change.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { WardenError } from "../../src/core/errors.js";
import { Materializer } from "../../src/providers/materializer.js";
import { MemorySource, fullBundleFiles, listTree } from "../providers/helpers.js";
import { tempDir } from "../support/temp.js";

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), "materialize-swap-child.ts");
const ROUNDS = 300;
const TIME_BUDGET_MS = 10_000;

/** A directory outside the root holding the bundle's subdirectories, as `~/.claude/skills` would. */
function makeVictim(victim: string): void {
  for (const d of [".claude-plugin", "skills/lint", "skills/review"]) fs.mkdirSync(path.join(victim, d), { recursive: true, mode: 0o700 });
  fs.writeFileSync(path.join(victim, "skills", "keep.md"), "the victim's own file\n", { mode: 0o600 });
}

describe("security: a directory of a materialization swapped for a symlink while it is written", () => {
  let dir: string;
  before(() => {
    dir = tempDir("security-matswap");
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("never writes outside the root; every round succeeds under the root or fails typed", async () => {
    const root = path.join(dir, "mat");
    const victim = path.join(dir, "victim");
    makeVictim(victim);
    const victimBefore = listTree(victim);

    const source = new MemorySource();
    source.add("b", "r1", fullBundleFiles());
    const mat = new Materializer({ root, source });
    const outsideBefore = fs.readdirSync(dir).sort();

    const child = spawn(process.execPath, ["--import", "tsx", CHILD, root, victim], { stdio: ["pipe", "pipe", "inherit"] });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
    const exited = once(child, "exit");
    try {
      while (!out.includes("ready\n")) await new Promise((resolve) => setTimeout(resolve, 10));

      const counts = { rounds: 0, succeeded: 0, typed: new Map<string, number>(), escapes: 0, revalidateFailed: 0 };
      const untyped: unknown[] = [];
      const started = Date.now();
      for (let i = 0; i < ROUNDS && Date.now() - started < TIME_BUDGET_MS; i++) {
        const session = `s${i}`;
        counts.rounds++;
        try {
          const m = await mat.materialize({ provider: "claude", bundle: { bundle_id: "b", revision: "r1" }, session });
          counts.succeeded++;
          assert.equal(path.dirname(m.root), root, "a materialization was published outside its root");
          // A swap after the last check may leave a symlink in the published tree; launch's
          // revalidation must then refuse it (typed), never pass.
          await mat.revalidate(session).catch((error: unknown) => {
            if (!(error instanceof WardenError)) throw error;
            counts.revalidateFailed++;
          });
          await mat.cleanup(session);
        } catch (error) {
          if (error instanceof WardenError && typeof error.code === "string" && error.code.length > 0) {
            counts.typed.set(error.code, (counts.typed.get(error.code) ?? 0) + 1);
          } else {
            untyped.push(error);
          }
        }
        if (listTree(victim).join("\n") !== victimBefore.join("\n")) {
          counts.escapes++;
          // Put the victim back so every later round is counted on its own.
          fs.rmSync(victim, { recursive: true, force: true });
          makeVictim(victim);
        }
      }
      child.stdin.end();
      await exited;
      const swaps = Number.parseInt(out.replace("ready\n", "").trim(), 10);
      const summary = `rounds ${counts.rounds}, swaps ${swaps}, succeeded ${counts.succeeded} (revalidation refused ${counts.revalidateFailed}), typed failures ${JSON.stringify(Object.fromEntries(counts.typed))}, untyped ${untyped.length}${untyped.length > 0 ? ` (first: ${String(untyped[0])})` : ""}, escapes ${counts.escapes}`;
      console.log(`materialize-swap: ${summary}`);
      // The race must really have been run, or the test proves nothing.
      assert.ok(swaps >= 10, `too few swaps to judge: ${summary}`);
      assert.equal(counts.escapes, 0, `warden wrote outside the materializations root: ${summary}`);
      assert.deepEqual(
        untyped.map((e) => String(e)),
        [],
        `failures without a typed code: ${summary}`,
      );
      assert.deepEqual(fs.readdirSync(dir).sort(), outsideBefore, "entries appeared beside the materializations root");
      // Every round cleaned up after itself: no temp tree, link or session is left in the root.
      assert.deepEqual(
        fs.readdirSync(root).filter((name) => !name.startsWith(".lock-")),
        [],
        "a round left entries in the materializations root",
      );
    } finally {
      child.stdin.end();
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
  it("a root reached through a symlinked ancestor (a linked home) is no swap: it materializes and revalidates", async () => {
    // Descriptors name the real path; a check comparing it with the path as given would refuse
    // every materialization under, say, a /home that is a link.
    fs.mkdirSync(path.join(dir, "real"), { mode: 0o700 });
    fs.symlinkSync(path.join(dir, "real"), path.join(dir, "linked"));
    const source = new MemorySource();
    source.add("b", "r1", fullBundleFiles());
    const root = path.join(dir, "linked", "mat");
    const mat = new Materializer({ root, source });
    for (const provider of ["claude", "codex", "kimi"] as const) {
      const session = `linked-${provider}`;
      const bundle = provider === "kimi" ? { bundle_id: "k", revision: "r1" } : { bundle_id: "b", revision: "r1" };
      if (provider === "kimi") source.add("k", "r1", fullBundleFiles().filter((f) => f.kind !== "mcp-declaration"));
      const m = await mat.materialize({ provider, bundle, session });
      assert.equal(m.root, path.join(root, session));
      assert.ok(fs.lstatSync(path.join(dir, "real", "mat", session)).isDirectory());
      await mat.revalidate(session);
      await mat.cleanup(session);
    }
    assert.deepEqual(fs.readdirSync(path.join(dir, "real", "mat")).filter((n) => !n.startsWith(".lock-")), []);
  });
});
