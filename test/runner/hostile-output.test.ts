/**
 * An agent's output cannot crash its own run (issue 27): a result text holding a lone surrogate
 * and numbers past a double's range in its events are kept as representable JSON (U+FFFD; the
 * number as the text it was written as), and the run is recorded, its journal verifying, instead
 * of the agent being killed and the run left unresolved.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { AGENTS, OPERATOR, json, openTestNode, type TestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";

describe("an agent printing what JSON.parse reads but the journal cannot hold", () => {
  let root: string;
  let node: TestNode;
  before(async () => {
    root = tempDir("runner-hostile-output");
    node = await openTestNode(root, { warden: { providers: { claude: { command: path.join(AGENTS, "claude-hostile-output.mjs") } } } });
  });
  after(async () => {
    await node.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("is recorded: the answer's lone surrogate as U+FFFD, 1e400 kept as text, the journal verifying", async () => {
    const res = await node.app.inject({
      method: "POST",
      url: "/v1/invocations",
      headers: { ...OPERATOR, "idempotency-key": randomUUID(), prefer: "wait=60" },
      payload: { provider: "claude", prompt: "review" },
    });
    assert.equal(res.statusCode, 200, res.payload);
    const view = json(res.payload);
    assert.equal(view.status, "recorded", res.payload);
    const result = view.result as { answer?: string; exit_code?: number; error?: unknown };
    assert.equal(result.exit_code, 0);
    assert.equal(result.error, undefined, res.payload);
    assert.equal(result.answer, "review done \uFFFD");
    const runId = view.run_id as string;
    const verification = json((await node.app.inject({ url: `/v1/runs/${runId}/verification`, headers: OPERATOR })).payload);
    assert.equal(verification.ok, true, JSON.stringify(verification));
    const journal = (await node.app.inject({ url: `/v1/runs/${runId}/journal`, headers: OPERATOR })).payload;
    const notes = journal.split("\n").filter((line) => line.includes("rate_limit_event"));
    assert.equal(notes.length, 1, journal);
    assert.match(notes[0]!, /"retry_after":"1e400"/);
    assert.match(notes[0]!, /"limit":"-2E\+999"/);
    assert.match(notes[0]!, /"label":"\uFFFD"/);
    assert.match(journal, /"total_cost_usd":"1e400"/);
  });
});
