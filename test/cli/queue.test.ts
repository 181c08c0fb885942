/**
 * The queue from the CLI (DESIGN.md "Queued invocations"): `warden invoke --async` prints the
 * queued invocation and exits 0, `warden invocations --status queued` lists it, `warden cancel`
 * cancels it (it never runs), and the queue's options without --async are refused.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { OPERATOR_TOKEN, openTestNode } from "../support/app-node.js";
import { wardenInProcess } from "../support/cli.js";
import { tempDir } from "../support/temp.js";
import { waitFor } from "../support/wait.js";

test("warden invoke --async, warden invocations --status queued, warden cancel", async (t) => {
  const root = tempDir("cli-queue");
  const gate = path.join(root, "gate");
  const spans = path.join(root, "spans.ndjson");
  const node = await openTestNode(root, {
    warden: { queue: { slots: 1 }, agentEnv: { PATH: process.env.PATH, WARDEN_FIXTURE_GATE: gate, WARDEN_FIXTURE_SPANS: spans } },
  });
  t.after(async () => {
    fs.writeFileSync(gate, "");
    await node.app.close();
    await node.warden.close({ graceMs: 2000 });
    fs.rmSync(root, { recursive: true, force: true });
  });
  await node.app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = node.app.server.address() as AddressInfo;
  const env = { WARDEN_URL: `http://127.0.0.1:${port}`, WARDEN_TOKEN: OPERATOR_TOKEN };
  const cli = (...args: string[]) => wardenInProcess(args, { env });

  const busy = randomUUID();
  const first = await cli("invoke", "--async", "--id", busy, "--provider", "claude", "--", "busy #gate");
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, new RegExp(`^queued api:alice ${busy} \\(queued at `));
  await waitFor("the busy agent to start", () => (fs.existsSync(spans) ? true : undefined));

  const waiting = randomUUID();
  const second = await cli("invoke", "--async", "--id", waiting, "--provider", "claude", "--priority", "3", "--label", "provider.claude=true", "--json", "--", "waiting");
  assert.equal(second.code, 0, second.stderr);
  assert.equal((JSON.parse(second.stdout) as { status: string }).status, "queued");

  const listed = await cli("invocations", "--status", "queued", "--json");
  assert.equal(listed.code, 0, listed.stderr);
  const items = (JSON.parse(listed.stdout) as { items: { id: string; priority: number }[] }).items;
  assert.deepEqual(items.map((i) => [i.id, i.priority]), [[waiting, 3]]);

  const cancelled = await cli("cancel", "api:alice", waiting);
  assert.equal(cancelled.code, 0, cancelled.stderr);
  assert.match(cancelled.stdout, new RegExp(`^cancelled api:alice ${waiting}`));
  assert.match(cancelled.stdout, /cancelled by +api:alice/);

  const refused = await cli("invoke", "--id", randomUUID(), "--provider", "claude", "--priority", "1", "--", "x");
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /\(invoke-options-invalid\)/);

  fs.writeFileSync(gate, "");
  const done = await cli("invocations", "show", "api:alice", busy, "--json");
  assert.ok(done.code === 0 || done.code === 2, done.stderr);
  const unknown = await cli("cancel", "api:alice", randomUUID());
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /\(invocation-not-found\)/);
  const text = fs.readFileSync(spans, "utf8");
  assert.ok(!text.includes('"prompt":"waiting"'), "the cancelled invocation never ran");
});
