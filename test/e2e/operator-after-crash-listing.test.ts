/**
 * The operator's worklist after a crash: `warden invocations --status unresolved` (and
 * `GET /v1/invocations?status=unresolved` behind it). A recorded run whose stored row or journal
 * no longer passes its checks answers `unresolved` to lookup and inspect (G2: no verified recorded
 * result), and needs an operator as much as a run cut off by `kill -9`. The listing must show it,
 * marked with its problem, beside the run the crash left unresolved; an intact recorded run stays
 * out of it. The run looked up is queued by the lookup that found its problem; the damaged row,
 * which nobody looked up, by the node's scrub (it starts with the node).
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { closeSync, mkdirSync, openSync, readSync, readdirSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { editClaim } from "../invocations/fixtures/tamper.js";
import { httpCall, warden, type NodeProcess } from "../support/node.js";
import { startClaudeNode, waitFor } from "./operator-after-crash-support.js";
import { tempDir } from "../support/temp.js";

const TOKEN = "after-crash-listing-token-0123456789abc";
const SCOPE = "api:operator";

interface Item {
  id: string;
  status: string;
  problem?: string;
}

/** Flips one byte in the middle of a file, keeping its length (a bad disk, an edit). */
function flipMiddleByte(file: string): void {
  const fd = openSync(file, "r+");
  try {
    const size = readSync(fd, Buffer.alloc(1 << 20), 0, 1 << 20, 0);
    const at = Math.floor(size / 2);
    const one = Buffer.alloc(1);
    readSync(fd, one, 0, 1, at);
    one[0] = one[0] === 0x41 ? 0x42 : 0x41;
    writeSync(fd, one, 0, 1, at);
  } finally {
    closeSync(fd);
  }
}

describe("operator after a crash: the unresolved listing includes damaged recorded runs", () => {
  const root = tempDir("after-crash-listing");
  const home = join(root, "home");
  let node: NodeProcess | undefined;
  const start = (): Promise<NodeProcess> => startClaudeNode(home, TOKEN);
  const invoke = (id: string, prompt: string) =>
    httpCall(node!.url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": id }, body: { provider: "claude", prompt } });
  const statusOf = async (id: string): Promise<string> => (await httpCall(node!.url, TOKEN, "GET", `/v1/invocations/${SCOPE}/${id}`)).body.status as string;

  after(async () => {
    await node?.kill();
    rmSync(root, { recursive: true, force: true });
  });

  it("lists an edited journal's run and a damaged row as unresolved with their problems, beside the run cut by kill -9", async () => {
    mkdirSync(home, { mode: 0o700 });
    node = await start();
    const [journalEdited, rowEdited, intact] = [randomUUID(), randomUUID(), randomUUID()];
    const runIds = new Map<string, string>();
    for (const id of [journalEdited, rowEdited, intact]) {
      const started = await invoke(id, "review the change");
      assert.ok(started.status === 200 || started.status === 202, `${started.status} ${started.text}`);
      runIds.set(id, started.body.run_id as string);
      await waitFor(`${id} to be recorded`, async () => ((await statusOf(id)) === "recorded" ? true : undefined));
    }
    const cut = randomUUID();
    assert.equal((await invoke(cut, "#hang")).status, 202);
    await waitFor("the hanging run to be in progress", async () => ((await statusOf(cut)) === "in_progress" ? true : undefined));
    await node.kill();
    node = undefined;

    // While the node is down: one run's journal and another's claim row are damaged.
    const journals = join(home, "journals");
    const journalFile = readdirSync(journals).find((n) => n.includes(runIds.get(journalEdited)!));
    assert.ok(journalFile !== undefined);
    flipMiddleByte(join(journals, journalFile));
    assert.equal(editClaim(home, SCOPE, rowEdited, "agent = ?", "mallory"), 1);

    node = await start();
    assert.equal(await statusOf(journalEdited), "unresolved", "lookup of a run whose journal changed answers unresolved (G2)");
    assert.equal(await statusOf(cut), "unresolved");

    const expected = new Map<string, Item>([
      [journalEdited, { id: journalEdited, status: "unresolved", problem: "journal-changed" }],
      [rowEdited, { id: rowEdited, status: "unresolved", problem: "claim-record-corrupt" }],
      [cut, { id: cut, status: "unresolved" }],
    ]);
    const shown = (items: readonly Item[]): Item[] =>
      items.map((i) => ({ id: i.id, status: i.status, ...(i.problem === undefined ? {} : { problem: i.problem }) })).sort((a, b) => (a.id < b.id ? -1 : 1));
    const want = [...expected.values()].sort((a, b) => (a.id < b.id ? -1 : 1));

    const queued = async (): Promise<Item[]> => {
      const http = await httpCall(node!.url, TOKEN, "GET", "/v1/invocations?status=unresolved");
      assert.equal(http.status, 200);
      return shown(http.body.items as Item[]);
    };
    // The scrub's first step at start-up finds the damaged row: wait for it to be recorded.
    await waitFor("the scrub to queue the damaged row", async () => ((await queued()).length === want.length ? true : undefined));
    assert.deepEqual(await queued(), want);
    const counts = await httpCall(node.url, TOKEN, "GET", "/v1/node");
    assert.equal((counts.body.counts as { unresolved: number }).unresolved, want.length, "the count badge counts the queue");

    const cli = await warden(["invocations", "--status", "unresolved", "--json"], { env: { WARDEN_HOME: home, WARDEN_TOKEN: TOKEN } });
    assert.equal(cli.code, 0, cli.stderr);
    assert.deepEqual(shown((JSON.parse(cli.stdout) as { items: Item[] }).items), want);
    const text = await warden(["invocations", "--status", "unresolved"], { env: { WARDEN_HOME: home, WARDEN_TOKEN: TOKEN } });
    assert.match(text.stdout, new RegExp(`^unresolved +${SCOPE} ${journalEdited}.*\\(journal-changed\\)$`, "m"));
    assert.match(text.stdout, new RegExp(`^unresolved +${SCOPE} ${rowEdited}.*\\(claim-record-corrupt\\)$`, "m"));
    assert.doesNotMatch(text.stdout, new RegExp(intact));

    // The recorded listing reads the same rows and says the same of them; the intact run stays recorded.
    const recorded = await httpCall(node.url, TOKEN, "GET", "/v1/invocations?status=recorded");
    assert.deepEqual(
      shown(recorded.body.items as Item[]),
      [expected.get(journalEdited)!, expected.get(rowEdited)!, { id: intact, status: "recorded" }].sort((a, b) => (a.id < b.id ? -1 : 1)),
    );
  });
});
