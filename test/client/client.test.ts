/**
 * The typed client against the real node (`warden serve` as a child process): push of the example
 * and fixture bundles, idempotent re-push, typed problem errors, transient failures injected at the
 * wire through the client's `fetch` seam (a lost acknowledgement, a dropped connection, a chunk
 * sent at the wrong offset, a 503), and the run routes (journal, keys, verification, events).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { WardenClient, WardenConnectionError, createNodeFetch, WardenHttpError, compileForPush, derivedRevision, type FetchFn } from "../../src/client/index.js";
import { verifyJournal } from "../../src/journal/verify.js";
import { closedPort, fixtureAgents, metricSum, removeHome, repo, startNode, type NodeProcess } from "../support/node.js";
import { writeRandomBundle } from "./bundle-gen.js";
import { tempDir } from "../support/temp.js";

const example = join(repo, "examples", "review-bundle");
const fixtures = join(repo, "test", "fixtures", "bundles");
const KiB = 1024;

/** A fetch that lets a test fail chosen requests, before or after the node saw them. */
const wire = createNodeFetch();

type Fault = "pass" | "drop-before" | "drop-after" | "503" | { offset: number } | { status: number; code: string };

function problemResponse(status: number, code: string): Response {
  return new Response(JSON.stringify({ code, status, title: "x", detail: "injected", type: "x" }), { status, headers: { "content-type": "application/problem+json" } });
}

function faultyFetch(decide: (method: string, url: string, n: number) => Fault): { fetch: FetchFn; calls: () => number } {
  let n = 0;
  const fetch: FetchFn = async (input, init) => {
    const url = String(input);
    const method = init?.method ?? "GET";
    const action = decide(method, url, n++);
    if (action === "drop-before") throw new TypeError("fetch failed", { cause: Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }) });
    if (action === "503") return problemResponse(503, "storage-unavailable");
    if (typeof action === "object" && "status" in action) return problemResponse(action.status, action.code);
    if (typeof action === "object") {
      const headers = { ...(init?.headers as Record<string, string>), "upload-offset": String(action.offset) };
      return wire.fetch(input, { ...init, headers });
    }
    const response = await wire.fetch(input, init);
    if (action === "drop-after") {
      await response.body?.cancel();
      throw new TypeError("fetch failed", { cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }) });
    }
    return response;
  };
  return { fetch, calls: () => n };
}

describe("warden/client against a real node", () => {
  let node: NodeProcess;
  let client: WardenClient;
  const scratch = tempDir("client");
  const workspace = tempDir("client-ws");

  before(async () => {
    node = await startNode({ args: ["--workspace", `main=${workspace}`, "--provider", `claude=${join(fixtureAgents, "claude.mjs")}`] });
    client = new WardenClient({ url: node.url, token: node.token });
  });
  after(async () => {
    client?.close();
    wire.close();
    await node?.stop();
    removeHome(node);
    rmSync(scratch, { recursive: true, force: true });
    rmSync(workspace, { recursive: true, force: true });
  });

  it("pushes examples/review-bundle; a second push sends nothing and answers the same receipt", async () => {
    const compiled = await compileForPush(example);
    const first = await client.push(example);
    assert.equal(first.alreadyCommitted, false);
    assert.equal(first.receipt.bundle_id, "review-bundle");
    assert.equal(first.receipt.revision, derivedRevision(compiled.manifest));
    assert.equal(first.receipt.manifest_digest, compiled.manifest.manifest_digest);
    assert.equal(first.receipt.bundle_digest, compiled.manifest.bundle_digest);
    const total = compiled.manifest.components.reduce((sum, c) => sum + c.blob.byte_len, 0);
    assert.equal(first.bytesSent, total, "every byte sent once");
    assert.equal(first.blobsSent, first.receipt.blobs.length);

    const again = await client.push(example);
    assert.deepEqual(again.receipt, first.receipt);
    assert.equal(again.alreadyCommitted, true);
    assert.equal(again.bytesSent, 0);
    assert.equal(again.blobsSent, 0);

    const view = await client.getBundle("review-bundle");
    assert.deepEqual(view.revisions.map((r) => r.receipt), [first.receipt]);
    assert.ok((await client.listBundles()).some((b) => b.bundle_id === "review-bundle"));
  });

  it("pushes the fixture bundles; the DESIGN vector bundle has the DESIGN digests", async () => {
    const vector = await client.push(join(fixtures, "vector"), { bundleId: "vector", revision: "v1" });
    assert.equal(vector.receipt.bundle_digest, "sha256:ba71773aa731bdc2e460cbde965db223f9fa8d499a1b97acc8ceeb376dcc432a");
    assert.deepEqual(vector.receipt.blobs, [{ digest: "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126", byte_len: 7 }]);
    const tools = await client.push(join(fixtures, "review-tools"), { revision: "r1" });
    assert.equal(tools.receipt.bundle_id, "review-tools");
    assert.ok(tools.receipt.blobs.length >= 6);
    // Same blobs under another revision: the stored blobs are not asked for again (G9).
    const copy = await client.push(join(fixtures, "review-tools"), { revision: "r2" });
    assert.equal(copy.alreadyCommitted, false);
    assert.equal(copy.bytesSent, 0);
    assert.equal(copy.blobsSent, 0);
  });

  it("refusals are WardenHttpError with the node's code; an unreachable node is node-unreachable", async () => {
    await assert.rejects(client.getBundle("no-such-bundle"), (e: unknown) => e instanceof WardenHttpError && e.status === 404 && e.code === "bundle-not-found");
    const anonymous = new WardenClient({ url: node.url });
    await assert.rejects(anonymous.listBundles(), (e: unknown) => e instanceof WardenHttpError && e.status === 401 && e.code === "unauthorized");
    const wrong = new WardenClient({ url: node.url, token: "not-the-token" });
    await assert.rejects(wrong.listBundles(), (e: unknown) => e instanceof WardenHttpError && e.status === 401);
    // Revision conflict: same id and revision, other content.
    const dir = join(scratch, "conflict");
    writeRandomBundle(dir, 1, 100);
    await assert.rejects(client.push(dir, { bundleId: "vector", revision: "v1" }), (e: unknown) => e instanceof WardenHttpError && e.code === "revision-conflict" && e.status === 409);
    const dead = new WardenClient({ url: `http://127.0.0.1:${await closedPort()}`, token: "x", retries: 1, backoffMs: 1 });
    await assert.rejects(dead.listBundles(), (e: unknown) => e instanceof WardenConnectionError && e.code === "node-unreachable" && /ECONNREFUSED/.test(e.message));
  });

  it("resumes through a lost acknowledgement, a dropped connection, a wrong offset and a 503, re-sending only unacknowledged bytes", async () => {
    const dir = join(scratch, "faults");
    writeRandomBundle(dir, 3, 96 * KiB);
    let patches = 0;
    const injected: string[] = [];
    const { fetch } = faultyFetch((method) => {
      if (method !== "PATCH") return "pass";
      patches++;
      // chunk 2: processed by the node, reply lost; chunk 4: never reaches it; chunk 6: wrong
      // offset (409 chunk-out-of-order with expected_offset); chunk 8: 503.
      const action = patches === 2 ? "drop-after" : patches === 4 ? "drop-before" : patches === 6 ? { offset: 5 } : patches === 8 ? "503" : "pass";
      if (action !== "pass") injected.push(typeof action === "object" ? "offset" : action);
      return action;
    });
    const faulty = new WardenClient({ url: node.url, token: node.token, fetch });
    const metricsBefore = metricSum(await client.metrics(), "warden_delivery_bytes_received_total");
    const result = await faulty.push(dir, { bundleId: "faults", revision: "r1", chunkBytes: 32 * KiB, concurrency: 1, backoffMs: 1 });
    assert.deepEqual(injected, ["drop-after", "drop-before", "offset", "503"]);
    assert.equal(result.alreadyCommitted, false);
    assert.equal(result.blobsSent, 3);
    const total = 3 * 96 * KiB;
    // The lost acknowledgement's chunk was stored: the re-sync moves past it, it is not re-sent.
    // Sent twice: the chunk dropped before the node saw it, the one sent at a wrong offset and
    // the one answered 503 (each 32 KiB); every other byte once.
    assert.equal(result.bytesSent, total + 3 * 32 * KiB);
    const received = metricSum(await client.metrics(), "warden_delivery_bytes_received_total") - metricsBefore;
    // The node received every byte once, plus the one chunk whose reply was lost… and nothing of
    // the dropped, the 503'd or the mis-offset chunk beyond what it refused.
    assert.ok(received >= total && received <= total + 2 * 32 * KiB, `node received ${received} bytes for ${total}`);
    const view = await client.getBundle("faults");
    assert.equal(view.revisions[0]!.receipt.manifest_digest, (await compileForPush(dir, { bundleId: "faults", revision: "r1" })).manifest.manifest_digest);
  });

  it("reports a refusal that retrying cannot change at once: 507 capacity-exhausted, a 500 damaged record", async () => {
    const dir = join(scratch, "refused");
    writeRandomBundle(dir, 2, 64 * KiB);
    for (const [status, code] of [
      [507, "capacity-exhausted"],
      [500, "delivery-record-corrupt"],
    ] as const) {
      const requests: string[] = [];
      const { fetch } = faultyFetch((method, url) => {
        requests.push(method);
        return method === "PATCH" ? { status, code } : "pass";
      });
      const refused = new WardenClient({ url: node.url, token: node.token, fetch, backoffMs: 1000 });
      const started = performance.now();
      await assert.rejects(
        refused.push(dir, { bundleId: "refused", revision: `r-${status}`, chunkBytes: 16 * KiB, concurrency: 1 }),
        (e: unknown) => e instanceof WardenHttpError && e.status === status && e.code === code,
      );
      // One PATCH, then nothing: no backoff, no status re-sync, no second attempt.
      assert.deepEqual(requests, ["POST", "PATCH"], `${status}: ${requests.join(" ")}`);
      assert.ok(performance.now() - started < 1000, `${status} was reported after ${performance.now() - started} ms`);
    }
  });

  it("gives up after its retries when the node stays unreachable, and a later push resumes", async () => {
    const dir = join(scratch, "giveup");
    writeRandomBundle(dir, 2, 64 * KiB);
    let patches = 0;
    const { fetch } = faultyFetch((method) => (method === "PATCH" && ++patches > 2 ? "drop-before" : "pass"));
    const flaky = new WardenClient({ url: node.url, token: node.token, fetch });
    await assert.rejects(
      flaky.push(dir, { bundleId: "giveup", revision: "r1", chunkBytes: 16 * KiB, concurrency: 1, retries: 2, backoffMs: 1 }),
      (e: unknown) => e instanceof WardenConnectionError,
    );
    const resumed = await client.push(dir, { bundleId: "giveup", revision: "r1", chunkBytes: 16 * KiB });
    assert.equal(resumed.bytesSent, 2 * 64 * KiB - 2 * 16 * KiB, "the two acknowledged chunks are not sent again");
  });

  it("invokes once, replays the recorded result, and serves the run's journal, keys, verification and events", async () => {
    const id = randomUUID();
    const body = { provider: "claude" as const, prompt: "say hello", workspace: "main" };
    const first = await client.invoke(id, body, { waitSeconds: 30 });
    assert.equal(first.httpStatus, 200);
    assert.equal(first.replayed, false);
    assert.equal(first.invocation.status, "recorded");
    const runId = first.invocation.run_id!;
    const again = await client.invoke(id, body, { waitSeconds: 30 });
    assert.equal(again.replayed, true);
    assert.equal(again.invocation.run_id, runId);
    assert.deepEqual(again.invocation.result, first.invocation.result);
    await assert.rejects(client.invoke(id, { ...body, prompt: "something else" }), (e: unknown) => e instanceof WardenHttpError && e.status === 422 && e.code === "idempotency-conflict");

    const journal = await client.journal(runId);
    const report = verifyJournal(journal, await client.keys(), { runId });
    assert.equal(report.ok, true);
    const verification = await client.verifyRun(runId);
    assert.equal(verification.ok, true);
    assert.equal(verification.entries, report.entries);
    assert.equal(verification.requires_reconciliation, false);

    // A finished run's events: every entry, then the stream ends.
    const lines: string[] = [];
    const ends: string[] = [];
    for await (const event of client.events(runId)) {
      if (event.event === "message") lines.push(event.data);
      else ends.push(`${event.event} ${event.data}`);
    }
    const stored = new TextDecoder().decode(journal).trimEnd().split("\n");
    assert.deepEqual(lines, stored);
    assert.deepEqual(ends, ['end {"reason":"terminated"}']);
  });
});
