/**
 * Parked runs on every backend (DESIGN.md "Governed tool calls"): `ClaimStore.adopt` moves an
 * open, unreleased claim from one owner to this one and nothing else; `JournalStore.reopen`
 * appends after a journal's last byte; a parked run is taken up once, by one node, however many
 * processes answer at once.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { isWardenError } from "../../src/core/errors.js";
import type { InvocationHandle, OpenOutcome } from "../../src/invocations/index.js";
import { verifyJournal } from "../../src/journal/verify.js";
import { backendsUnderTest, type State, type StoreNode } from "./harness.js";

const SCOPE = "parking";
const request = { task: "ask first" };
const TAKE_UP = fileURLToPath(new URL("./fixtures/take-up.ts", import.meta.url));
/** How long a child may take to open its stores or answer, on a loaded machine. */
const CHILD_TIMEOUT_MS = 120_000;

function fresh(outcome: OpenOutcome): InvocationHandle {
  assert.equal(outcome.status, "fresh");
  if (outcome.status !== "fresh") throw new Error("unreachable");
  return outcome.handle;
}

/** A run with one effect, parked (its journal ends `run.parked`, its claim open). */
async function parkedRun(node: StoreNode): Promise<{ id: string; runId: string }> {
  const id = randomUUID();
  const handle = fresh(await node.invocations.open(SCOPE, id, request, "agent"));
  await handle.effect({ kind: "tool", name: "ls", fingerprint: "ls" }, () => "listed");
  await handle.journal.append({ type: "policy.decision", call_id: "claude:rm", tool: "Bash", action: "shell", decision: "ask", policies: ["ask-rm"], fingerprint: `sha256:${"0".repeat(64)}` });
  await handle.journal.append({
    type: "run.parked",
    call_id: "claude:rm",
    tool: "Bash",
    policies: ["ask-rm"],
    deadline: "2099-01-01T00:00:00.000Z",
    session: "e1bc0f7e-1b2c-4416-aa62-89129da5a5d2",
    workspace: "main",
  });
  await handle.park();
  assert.equal((await node.invocations.lookup(SCOPE, id))?.status, "awaiting_approval");
  return { id, runId: handle.run_id };
}

async function rejectsWith(promise: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(promise, (e: unknown) => {
    assert.ok(isWardenError(e), `expected WardenError ${code}, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    return true;
  });
}

/** The types of a run's journal entries, after verifying it whole with the node's keys. */
async function verifiedTypes(node: StoreNode, runId: string): Promise<string[]> {
  const bytes = await node.journals.read(runId, 1 << 20);
  assert.ok(bytes !== undefined);
  const report = verifyJournal(bytes, await node.invocations.publicKeys(true), { runId });
  assert.equal(report.ok, true, JSON.stringify(report.first_error));
  return report.valid.map((e) => e.event.type);
}

interface Child {
  readonly process: ChildProcessWithoutNullStreams;
  /** the next line the child prints */
  line(what: string): Promise<string>;
}

function startChild(state: State, id: string): Child {
  const child = spawn(process.execPath, ["--import", "tsx", TAKE_UP, JSON.stringify(state.location), SCOPE, id], { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString("utf8")));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    process: child,
    async line(what) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`the take-up child did not print ${what} within ${CHILD_TIMEOUT_MS} ms; stderr: ${stderr}`)), CHILD_TIMEOUT_MS);
      });
      try {
        const next = await Promise.race([lines.next(), timeout]);
        if (next.done === true) throw new Error(`the take-up child ended before it printed ${what}; stderr: ${stderr}`);
        return next.value;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

for (const backend of backendsUnderTest()) {
  describe(`parked runs on ${backend.name}`, () => {
    backend.hooks();

    test("adopt moves an open, unreleased claim from the owner named, and nothing else", async (t) => {
      const state = await backend.state(t);
      const first = await state.open();
      const open = fresh(await first.invocations.open(SCOPE, randomUUID(), request, "agent"));
      const released = fresh(await first.invocations.open(SCOPE, randomUUID(), request, "agent"));
      await released.release();
      const done = fresh(await first.invocations.open(SCOPE, randomUUID(), request, "agent"));
      await done.finish({ ok: true });
      const key = (h: InvocationHandle) => ({ scope: SCOPE, id: h.id });
      const owner = (await first.claims.get(key(open)))!.owner;
      await first.close();

      const second = await state.open();
      assert.ok(second.claims.adopt !== undefined);
      const adopt = second.claims.adopt.bind(second.claims);
      const before = await second.claims.get(key(open));
      assert.equal(await adopt(key(open), open.run_id, randomUUID()), false, "adopted from an owner that does not hold it");
      assert.equal(await adopt(key(open), randomUUID(), owner), false, "adopted another run's claim");
      assert.deepEqual(await second.claims.get(key(open)), before, "a refused adopt wrote");
      assert.equal(await adopt(key(released), released.run_id, owner), false, "adopted a released claim");
      assert.equal(await adopt(key(done), done.run_id, owner), false, "adopted a recorded claim");
      assert.equal(await adopt(key(open), open.run_id, owner), true);
      const taken = await second.claims.get(key(open));
      assert.equal(taken?.owner, second.claims.ownerId);
      assert.equal(taken?.owner_alive, true);
      assert.deepEqual({ ...taken, owner: owner, owner_alive: false }, before, "adopt changed more than the owner");
      assert.equal(await adopt(key(open), open.run_id, owner), false, "adopted twice from the same owner");
    });

    test("reopen appends after a journal's last byte; a run with no journal is journal-not-found", async (t) => {
      const node = await (await backend.state(t)).open();
      assert.ok(node.journals.reopen !== undefined);
      const runId = randomUUID();
      const created = await node.journals.create(runId);
      await created.append(Buffer.from("one\n"));
      await created.append(Buffer.from("two\n"));
      await created.close();
      const again = await node.journals.reopen(runId);
      assert.equal(again.size, 8);
      await again.append(Buffer.from("three\n"));
      await again.close();
      assert.equal(Buffer.from((await node.journals.read(runId, 1024))!).toString("utf8"), "one\ntwo\nthree\n");
      await rejectsWith(node.journals.reopen(randomUUID()), "journal-not-found");
    });

    test("a parked run is counted awaiting approval, not unresolved (GET /v1/node counts)", async (t) => {
      const node = await (await backend.state(t)).open();
      // Counts are store-wide (a shared database may hold other tests' claims): compared as changes.
      const base = await node.invocations.counts();
      await parkedRun(node);
      const now = await node.invocations.counts();
      assert.deepEqual(
        { awaiting_approval: now.awaiting_approval - base.awaiting_approval, unresolved: now.unresolved - base.unresolved, in_progress: now.in_progress - base.in_progress, total: now.total - base.total },
        { awaiting_approval: 1, unresolved: 0, in_progress: 0, total: 1 },
      );
    });

    test("a parked run is taken up by a restarted node: its journal goes on after run.parked, verified, and its result is recorded once", async (t) => {
      const state = await backend.state(t);
      const first = await state.open();
      const { id, runId } = await parkedRun(first);
      await first.close();
      const second = await state.open();
      assert.equal((await second.invocations.lookup(SCOPE, id))?.status, "awaiting_approval", "a parked run whose node is gone is still parked");
      const { handle, parked } = await second.invocations.takeUp(SCOPE, id);
      assert.equal(handle.run_id, runId);
      assert.equal(parked.call_id, "claude:rm");
      await handle.journal.append({ type: "policy.approval", call_id: "claude:rm", decision: "deny", by: { name: "ops", role: "operator" } });
      assert.equal((await handle.finish({ denied: true }, { failed: true })).status, "recorded");
      assert.deepEqual(await verifiedTypes(second, runId), ["run.started", "effect.started", "effect.finished", "policy.decision", "run.parked", "policy.approval", "run.terminated"]);
      await rejectsWith(second.invocations.takeUp(SCOPE, id), "invocation-not-awaiting-approval");
    });

    if (backend.name === "postgres") {
      test("another node takes up a run whose parker is alive (parking let its claim go)", async (t) => {
        const state = await backend.state(t);
        const parker = await state.open();
        const { id, runId } = await parkedRun(parker);
        const other = startChild(state, id);
        t.after(() => other.process.kill("SIGKILL"));
        assert.equal(await other.line("ready"), "ready");
        other.process.stdin.write("go\n");
        assert.deepEqual(JSON.parse(await other.line("its answer")), { taken: true, status: "recorded" });
        other.process.stdin.end();
        assert.equal((await parker.invocations.lookup(SCOPE, id))?.status, "recorded");
        assert.deepEqual((await verifiedTypes(parker, runId)).slice(-2), ["note", "run.terminated"]);
      });
    }

    // Embedded: one node per home, so a parked run's live parker keeps it and the others wait for
    // it to go. PostgreSQL: parking lets the claim go, so the live parker races the others.
    const parkerRaces = backend.name === "postgres";
    type Answer = { taken: boolean; code?: string; status?: string };
    test(`processes taking one parked run up at once: exactly one takes it (${parkerRaces ? "the live parker among them" : "its parker gone"})`, async (t) => {
      const state = await backend.state(t);
      const parker = await state.open();
      const { id, runId } = await parkedRun(parker);
      if (!parkerRaces) await parker.close();
      const children = [startChild(state, id), startChild(state, id)];
      t.after(() => {
        for (const c of children) c.process.kill("SIGKILL");
      });
      for (const c of children) assert.equal(await c.line("ready"), "ready");
      for (const c of children) c.process.stdin.write("go\n");
      const own: Promise<Answer> | undefined = parkerRaces
        ? parker.invocations.takeUp(SCOPE, id).then(
            async ({ handle }) => {
              await handle.journal.append({ type: "note", taken_by: process.pid });
              return { taken: true, status: (await handle.finish({ by: process.pid })).status };
            },
            (error: unknown) => ({ taken: false, code: isWardenError(error) ? error.code : String(error) }),
          )
        : undefined;
      const answers: Answer[] = [...(await Promise.all(children.map(async (c) => JSON.parse(await c.line("its answer")) as Answer))), ...(own === undefined ? [] : [await own])];
      const winners = answers.filter((a) => a.taken);
      assert.equal(winners.length, 1, `exactly one take-up: ${JSON.stringify(answers)}`);
      assert.equal(winners[0]!.status, "recorded");
      for (const lost of answers.filter((a) => !a.taken)) {
        // Lost the adopt, or came after the winner had gone on (then the run is no longer parked).
        assert.ok(["claim-changed", "invocation-not-awaiting-approval", "invocation-parked-elsewhere"].includes(lost.code!), JSON.stringify(lost));
      }
      for (const c of children) c.process.stdin.end();
      const reader = parkerRaces ? parker : await state.open();
      const types = await verifiedTypes(reader, runId);
      assert.deepEqual(types, ["run.started", "effect.started", "effect.finished", "policy.decision", "run.parked", "note", "run.terminated"], "one continuation");
      assert.equal((await reader.invocations.lookup(SCOPE, id))?.status, "recorded");
    });
  });
}
