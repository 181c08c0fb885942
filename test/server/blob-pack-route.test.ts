/**
 * Blob packs over HTTP on loopback (DESIGN.md "Blob packs"): the route's 204, its refusals as
 * problem documents naming the frame, framing cut short, a refused pack's rest read and dropped so
 * the same connection carries the next request; and the client's push, which packs small blobs
 * and, against a node without the pack route (the server's `blobPacks: false`, answered as a node
 * that predates packs answers it), uploads blob by blob; against a node with a lower chunk limit,
 * sends nothing over the limit its begin answer names, and re-splits after a 413 when the answer
 * names none usable.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { WardenClient, compileForPush, createNodeFetch, type FetchFn } from "../../src/client/index.js";
import { encodePack, type PackChunk } from "../../src/delivery/blob-pack-frame.js";
import { OPERATOR, OPERATOR_TOKEN, compileTestBundle, contentOf, json, openTestNode, type TestNode } from "../support/app-node.js";
import { metricSum, startNode, type NodeProcess } from "../support/node.js";
import { READY_MS, waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";
import { writeRandomBundle } from "../client/bundle-gen.js";

const KiB = 1024;
const PACK_TYPE = "application/vnd.warden.blob-pack";

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
  readonly reusedSocket: boolean;
}

/** One request on `agent`, the body written whole. */
function call(agent: http.Agent, url: string, method: string, headers: Record<string, string>, body?: Uint8Array): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method, agent, headers }, (response) => {
      let text = "";
      response.setEncoding("utf8").on("data", (s: string) => (text += s));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text, reusedSocket: request.reusedSocket }));
    });
    request.on("error", reject);
    request.end(body);
  });
}

function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms / 1000} s`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

async function listening(node: TestNode): Promise<string> {
  await node.app.listen({ host: "127.0.0.1", port: 0 });
  return `http://127.0.0.1:${(node.app.server.address() as AddressInfo).port}`;
}

/** A fetch that records each request's method and path. */
function recording(): { fetch: FetchFn; requests: string[]; close(): void } {
  const wire = createNodeFetch();
  const requests: string[] = [];
  const fetch: FetchFn = (input, init) => {
    requests.push(`${init?.method ?? "GET"} ${new URL(String(input)).pathname}`);
    return wire.fetch(input, init);
  };
  return { fetch, requests, close: () => wire.close() };
}

describe("the blob pack route", () => {
  let node: TestNode;
  let base: string;
  let agent: http.Agent;
  before(async () => {
    node = await openTestNode(tempDir("server-blob-pack"));
    base = await listening(node);
  });
  after(async () => {
    agent?.destroy();
    await node.close();
    fs.rmSync(node.root, { recursive: true, force: true });
  });

  async function begin(revision: string): Promise<{ stageId: string; frames: PackChunk[] }> {
    // Files of this revision alone: the node lacks them whatever an earlier revision stored.
    const extra = Object.fromEntries([1, 2, 3, 4].map((i) => [`data/${revision}-${i}.txt`, `${revision} ${i} ${"x".repeat(i * 1000)}`]));
    const bundle = await compileTestBundle(node.root, "pack-route", revision, extra);
    const begun = json((await node.app.inject({ method: "POST", url: "/v1/stages", headers: OPERATOR, payload: bundle.manifest })).payload);
    const missing = begun.missing as { digest: string; byte_len: number }[];
    return { stageId: begun.stage_id as string, frames: missing.map((m) => ({ digest: m.digest, offset: 0, bytes: contentOf(bundle, m.digest) })) };
  }
  const packHeaders = (body: Uint8Array): Record<string, string> => ({ ...OPERATOR, "content-type": PACK_TYPE, "content-length": String(body.byteLength) });
  const missingOf = async (stageId: string): Promise<Map<string, number>> =>
    new Map((json((await node.app.inject({ method: "GET", url: `/v1/stages/${stageId}`, headers: OPERATOR })).payload).missing as { digest: string; offset: number }[]).map((m) => [m.digest, m.offset]));

  it("applies a pack (204, no payload, bytes counted); the same pack again after a lost reply doubles nothing; the stage commits", async () => {
    agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const { stageId, frames } = await begin("r1");
    assert.ok(frames.length >= 3);
    const body = encodePack(frames);
    const url = `${base}/v1/stages/${stageId}/blobs`;
    const metricsBefore = metricSum((await node.app.inject({ method: "GET", url: "/metrics", headers: OPERATOR })).payload, "warden_delivery_bytes_received_total");
    const applied = await call(agent, url, "PATCH", packHeaders(body), body);
    assert.equal(applied.status, 204, applied.body);
    assert.equal(applied.body, "");
    assert.equal(applied.headers["content-type"], undefined);
    assert.equal((await missingOf(stageId)).size, 0);
    const again = await call(agent, url, "PATCH", packHeaders(body), body);
    assert.equal(again.status, 204, again.body);
    const received = metricSum((await node.app.inject({ method: "GET", url: "/metrics", headers: OPERATOR })).payload, "warden_delivery_bytes_received_total") - metricsBefore;
    // Blob bytes, as for chunks: each frame's data, not its header.
    assert.equal(received, 2 * frames.reduce((sum, f) => sum + f.bytes.byteLength, 0));
    const commit = await node.app.inject({ method: "POST", url: `/v1/stages/${stageId}/commit`, headers: OPERATOR });
    assert.equal(commit.statusCode, 200, commit.payload);
  });

  it("refuses at frame k with the chunk's problem plus frame and digest; framing cut short is 400 blob-pack-invalid; the connection stays usable", async () => {
    agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const { stageId, frames } = await begin("r2");
    const [first, second, ...rest] = frames;
    const url = `${base}/v1/stages/${stageId}/blobs`;
    // Frame 1 out of order, followed by 2 MiB of frames: more than loopback buffers hold, so an
    // unread rest would block the connection.
    const filler = Array.from({ length: 32 }, () => ({ ...second!, offset: 1, bytes: new Uint8Array(64 * KiB) }));
    const outOfOrder = encodePack([first!, { ...second!, offset: 1, bytes: second!.bytes.subarray(1) }, ...filler]);
    const refused = await within(READY_MS, "the refusal", call(agent, url, "PATCH", packHeaders(outOfOrder), outOfOrder));
    assert.equal(refused.status, 409, refused.body);
    assert.equal(refused.headers["content-type"], "application/problem+json; charset=utf-8");
    const problem = json(refused.body);
    assert.deepEqual([problem.code, problem.frame, problem.digest, problem.expected_offset], ["chunk-out-of-order", 1, second!.digest, 0]);
    let missing = await missingOf(stageId);
    assert.equal(missing.has(first!.digest), false, "frame 0 kept");
    assert.equal(missing.get(second!.digest), 0);

    // The declared length ends inside frame 1's data.
    const whole = encodePack([second!, ...rest]);
    const cut = whole.subarray(0, 44 + second!.bytes.byteLength + 44 + 1);
    const truncated = await within(READY_MS, "the framing refusal", call(agent, url, "PATCH", packHeaders(cut), cut));
    assert.equal(truncated.status, 400, truncated.body);
    assert.deepEqual([json(truncated.body).code, json(truncated.body).frame], ["blob-pack-invalid", 1]);
    assert.equal(truncated.reusedSocket, true, "the refusal came over the kept-alive connection");
    missing = await missingOf(stageId);
    assert.equal(missing.has(second!.digest), false, "frame 0 of the cut pack kept");
    if (rest[0] !== undefined) assert.equal(missing.get(rest[0].digest), 0, "nothing of the cut frame kept");

    const status = await within(READY_MS, "the next request on that connection", call(agent, `${base}/v1/stages/${stageId}`, "GET", OPERATOR));
    assert.equal(status.status, 200);
    assert.equal(status.reusedSocket, true);

    // The rules of the door: media type, declared length, the chunk limit.
    const rightBody = encodePack(rest);
    const wrongType = await call(agent, url, "PATCH", { ...packHeaders(rightBody), "content-type": "application/octet-stream" }, rightBody);
    assert.deepEqual([wrongType.status, json(wrongType.body).code], [415, "unsupported-media-type"]);
    const unbounded = await new Promise<Answer>((resolve, reject) => {
      const request = http.request(url, { method: "PATCH", agent, headers: { ...OPERATOR, "content-type": PACK_TYPE, "transfer-encoding": "chunked" } }, (response) => {
        let text = "";
        response.setEncoding("utf8").on("data", (s: string) => (text += s));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text, reusedSocket: request.reusedSocket }));
      });
      request.on("error", reject);
      request.end(rightBody);
    });
    assert.deepEqual([unbounded.status, json(unbounded.body).code], [411, "content-length-required"]);
    const tooLarge = await call(new http.Agent(), url, "PATCH", { ...OPERATOR, "content-type": PACK_TYPE, "content-length": String(8 * 1024 * KiB + 1) });
    assert.deepEqual([tooLarge.status, json(tooLarge.body).code], [413, "chunk-too-large"]);

    const done = await call(agent, url, "PATCH", packHeaders(rightBody), rightBody);
    assert.equal(done.status, 204, done.body);
    assert.equal((await node.app.inject({ method: "POST", url: `/v1/stages/${stageId}/commit`, headers: OPERATOR })).statusCode, 200);
  });
});

describe("push packs small blobs, and goes blob by blob to a node without packs", () => {
  const scratch = tempDir("client-pack");
  after(() => fs.rmSync(scratch, { recursive: true, force: true }));

  for (const packs of [true, false]) {
    it(packs ? "a node with packs: 40 small blobs in a few requests, and a large one in chunks" : "a node without the pack route: one 404, then every blob alone", async () => {
      const node = await openTestNode(join(scratch, `node-${packs}`), { server: { blobPacks: packs } });
      const wire = recording();
      try {
        const base = await listening(node);
        const dir = join(scratch, `bundle-${packs}`);
        writeRandomBundle(dir, 40, 3 * KiB);
        fs.writeFileSync(join(dir, "data", "large.bin"), Buffer.alloc(200 * KiB, 7));
        const client = new WardenClient({ url: base, token: OPERATOR_TOKEN, fetch: wire.fetch });
        const result = await client.push(dir, { bundleId: "packed", revision: "r1", chunkBytes: 64 * KiB, concurrency: packs ? 2 : 1 });
        const compiled = await compileForPush(dir, { bundleId: "packed", revision: "r1" });
        assert.equal(result.receipt.manifest_digest, compiled.manifest.manifest_digest);
        assert.equal(result.blobsSent, compiled.manifest.components.length);
        const patches = wire.requests.filter((r) => r.startsWith("PATCH"));
        const packRequests = patches.filter((r) => r.endsWith("/blobs"));
        const chunkRequests = patches.length - packRequests.length;
        const total = compiled.manifest.components.reduce((sum, c) => sum + c.blob.byte_len, 0);
        if (packs) {
          // 40 × (3 KiB + 44) in packs of at most 64 KiB: 2; the large blob in 4 chunks.
          assert.deepEqual([packRequests.length, chunkRequests], [2, 4], patches.join("\n"));
          assert.equal(result.bytesSent, total);
        } else {
          // The first pack is answered 404 route-not-found; from then on every blob goes alone.
          assert.equal(packRequests.length, 1, patches.join("\n"));
          assert.equal(chunkRequests, 40 + 4);
        }
        client.close();
      } finally {
        wire.close();
        await node.close();
      }
    });
  }
});

describe("push to a node whose chunk limit is lower than its requests", () => {
  const scratch = tempDir("client-pack-limit");
  after(() => fs.rmSync(scratch, { recursive: true, force: true }));

  /**
   * What the begin answer's `chunk_bytes` is made to say on its way to the client: left as the
   * node sent it, left out (a node that predates it), or replaced (a value that is not a positive
   * integer; or one larger than the limit the node enforces, as when it was lowered since begin).
   */
  type Announce = "as-sent" | "absent" | { readonly value: unknown };

  /** A fetch that records each PATCH's status and route, and rewrites the begin answer's `chunk_bytes` as told. */
  function patches(announce: Announce): { fetch: FetchFn; answers: string[]; announced: unknown[]; close(): void } {
    const wire = createNodeFetch();
    const answers: string[] = [];
    const announced: unknown[] = [];
    const fetch: FetchFn = async (input, init) => {
      const response = await wire.fetch(input, init);
      if (init?.method === "PATCH") answers.push(`${response.status} ${new URL(String(input)).pathname.endsWith("/blobs") ? "pack" : "chunk"}`);
      if (init?.method !== "POST" || new URL(String(input)).pathname !== "/v1/stages") return response;
      const body = (await response.json()) as Record<string, unknown>;
      announced.push(body.chunk_bytes);
      if (announce === "absent") delete body.chunk_bytes;
      else if (announce !== "as-sent") body.chunk_bytes = announce.value;
      return new Response(JSON.stringify(body), { status: response.status, headers: response.headers });
    };
    return { fetch, answers, announced, close: () => wire.close() };
  }

  /** A node whose chunk limit is 64 KiB, listening on loopback. */
  async function limitedNode(name: string): Promise<{ node: TestNode; base: string }> {
    const node = await openTestNode(join(scratch, `node-${name}`), { warden: { limits: { chunkBytes: 64 * KiB } } });
    return { node, base: await listening(node) };
  }

  /** `small` files of 3 KiB and one of 200 KiB, pushed to a node whose limit is 64 KiB; what the node's answers were. */
  async function pushLimited(at: { node: TestNode; base: string }, name: string, small: number, announce: Announce, chunkBytes: number | undefined): Promise<string[]> {
    const wire = patches(announce);
    try {
      const dir = join(scratch, `bundle-${name}`);
      writeRandomBundle(dir, small, 3 * KiB);
      // Random: no blob of one push is already stored by an earlier one to the same node.
      // First byte 0, as writeRandomBundle's: no executable's magic, which commit would refuse.
      fs.writeFileSync(join(dir, "data", "large.bin"), Buffer.concat([Buffer.alloc(1), randomBytes(200 * KiB - 1)]));
      const metric = async (): Promise<number> => metricSum((await at.node.app.inject({ method: "GET", url: "/metrics", headers: OPERATOR })).payload, "warden_delivery_bytes_received_total");
      const before = await metric();
      const client = new WardenClient({ url: at.base, token: OPERATOR_TOKEN, fetch: wire.fetch });
      const result = await client.push(dir, { bundleId: name, revision: "r1", concurrency: 1, ...(chunkBytes === undefined ? {} : { chunkBytes }) });
      client.close();
      assert.deepEqual(wire.announced, [64 * KiB], "the node names its limit in its begin answer");
      const compiled = await compileForPush(dir, { bundleId: name, revision: "r1" });
      assert.equal(result.receipt.manifest_digest, compiled.manifest.manifest_digest);
      assert.equal(result.blobsSent, compiled.manifest.components.length);
      // A refused request's bytes are not taken: every blob byte reached the node once.
      const total = compiled.manifest.components.reduce((sum, component) => sum + component.blob.byte_len, 0);
      assert.equal((await metric()) - before, total);
      assert.equal(result.bytesSent, total, "push reports as sent only the bytes the node took");
      return wire.answers;
    } finally {
      wire.close();
    }
  }

  /** Opens a node of its own for one push. */
  async function pushToOwnNode(name: string, small: number, announce: Announce, chunkBytes: number | undefined): Promise<string[]> {
    const at = await limitedNode(name);
    try {
      return await pushLimited(at, name, small, announce, chunkBytes);
    } finally {
      await at.node.close();
    }
  }

  /** The PATCHes the node answered 204, as [packs, chunks]. */
  const accepted = (answers: readonly string[]): [number, number] => {
    const ok = answers.filter((a) => a.startsWith("204"));
    return [ok.filter((a) => a.endsWith("pack")).length, ok.filter((a) => a.endsWith("chunk")).length];
  };

  const cases = [
    // The default request size packs everything in one request: within 64 KiB, the small blobs go
    // in packs of at most 64 KiB, the large one in chunks of 64 KiB.
    { name: "pack", small: 40, chunkBytes: undefined, packs: 2, chunks: 4 },
    // The small blobs fit one pack within the limit; the large one's chunks of 100 KiB would be
    // over it: it goes in chunks of 64 KiB.
    { name: "chunk", small: 10, chunkBytes: 100 * KiB, packs: 1, chunks: 4 },
  ];
  for (const c of cases) {
    it(`a node that names its limit at begin is sent no ${c.name} over it`, async () => {
      const answers = await pushToOwnNode(`named-${c.name}`, c.small, "as-sent", c.chunkBytes);
      assert.deepEqual(answers.filter((a) => !a.startsWith("204")), [], answers.join("\n"));
      assert.deepEqual(accepted(answers), [c.packs, c.chunks], answers.join("\n"));
    });
    // A node that does not name its limit (it predates the field), or names one it no longer
    // enforces: the first request over the limit is refused whole, and it and every later one go
    // within the `limit` of the 413.
    for (const announce of ["absent", { value: 8 * 1024 * KiB }] as const) {
      const what = announce === "absent" ? "a node that does not name its limit" : "a node whose limit fell after begin";
      it(`${what}: a ${c.name} refused 413 chunk-too-large is sent again within the node's limit`, async () => {
        const answers = await pushToOwnNode(`${announce === "absent" ? "unnamed" : "fell"}-${c.name}`, c.small, announce, c.chunkBytes);
        // One refusal, then every request within the limit: none refused again, none lost.
        assert.deepEqual(answers.filter((a) => a.startsWith("413")), [`413 ${c.name}`], answers.join("\n"));
        assert.deepEqual(accepted(answers), [c.packs, c.chunks], answers.join("\n"));
      });
    }
  }

  it("a begin answer whose chunk_bytes is not a positive integer is ignored: the 413 path sizes the push", async () => {
    const at = await limitedNode("malformed");
    try {
      for (const [i, value] of ["65536", 0, -65536, 1.5, 2 ** 53, null, { limit: 65536 }].entries()) {
        // Ten small blobs and the large one go in one pack at the default size, refused whole.
        const answers = await pushLimited(at, `malformed-${i}`, 10, { value }, undefined);
        assert.deepEqual(answers.filter((a) => a.startsWith("413")), ["413 pack"], `${JSON.stringify(value)}: ${answers.join("\n")}`);
        assert.deepEqual(accepted(answers), [1, 4], `${JSON.stringify(value)}: ${answers.join("\n")}`);
      }
    } finally {
      await at.node.close();
    }
  });
});

describe("push after a pack's reply is lost", () => {
  const scratch = tempDir("client-pack-lost");
  after(() => fs.rmSync(scratch, { recursive: true, force: true }));

  it("reads the stage's offsets and sends nothing the node holds again", async () => {
    const node = await openTestNode(join(scratch, "node"));
    const wire = createNodeFetch();
    let packs = 0;
    // The first pack reaches the node, which applies it; its answer never reaches the client.
    const fetch: FetchFn = async (input, init) => {
      const response = await wire.fetch(input, init);
      if (init?.method === "PATCH" && String(input).endsWith("/blobs") && packs++ === 0) {
        await response.body?.cancel();
        throw new TypeError("fetch failed", { cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }) });
      }
      return response;
    };
    try {
      const base = await listening(node);
      const dir = join(scratch, "bundle");
      writeRandomBundle(dir, 12, 2 * KiB);
      const metric = async (): Promise<number> => metricSum((await node.app.inject({ method: "GET", url: "/metrics", headers: OPERATOR })).payload, "warden_delivery_bytes_received_total");
      const before = await metric();
      const client = new WardenClient({ url: base, token: OPERATOR_TOKEN, fetch });
      const result = await client.push(dir, { bundleId: "lost", revision: "r1", chunkBytes: 16 * KiB, concurrency: 1, backoffMs: 1 });
      client.close();
      assert.equal(result.blobsSent, 12);
      assert.equal(packs, 2, "two packs of at most 16 KiB, the first not sent again");
      // Every blob byte reached the node once: the lost pack's blobs were found whole, not re-sent.
      assert.equal((await metric()) - before, 12 * 2 * KiB);
      assert.equal(result.bytesSent, 12 * 2 * KiB);
    } finally {
      wire.close();
      await node.close();
    }
  });
});

describe("a node killed -9 in the middle of a pack", () => {
  const scratch = tempDir("pack-kill");
  let node: NodeProcess | undefined;
  after(async () => {
    await node?.kill();
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  it("keeps the frames it acknowledged before it died; the push run again resumes from there and commits", async () => {
    const home = join(scratch, "home");
    const dir = join(scratch, "bundle");
    writeRandomBundle(dir, 8, 100 * KiB);
    node = await startNode({ home });
    const compiled = await compileForPush(dir, { bundleId: "killed", revision: "r1" });
    let client = new WardenClient({ url: node.url, token: node.token });
    const begun = await client.beginStage(compiled.manifest);
    assert.ok(!("committed" in begun && begun.committed === true));
    const stageId = begun.stage_id;
    const bytes = new Map<string, Uint8Array>(compiled.files.map((f) => [f.component.blob.digest, compiled.contents!.get(f.component.relative_path)!]));
    const frames = begun.missing.map((m) => ({ digest: m.digest, offset: 0, bytes: bytes.get(m.digest)! }));
    const body = encodePack(frames);
    // Three whole frames and half of the fourth are sent; the rest never is.
    const sent = 3 * (44 + 100 * KiB) + 44 + 50 * KiB;
    const request = http.request(`${node.url}/v1/stages/${stageId}/blobs`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${node.token}`, "content-type": PACK_TYPE, "content-length": String(body.byteLength) },
    });
    request.on("error", () => undefined); // the node dies under it
    request.write(body.subarray(0, sent));
    const acknowledged = await waitFor("the node to apply the pack's first three frames", async () => {
      const status = await client.stageStatus(stageId);
      const left = new Set(status.missing.map((m) => m.digest));
      return frames.slice(0, 3).every((f) => !left.has(f.digest)) ? status : undefined;
    });
    assert.equal(acknowledged.missing.length, frames.length - 3);
    await node.kill();
    request.destroy();
    client.close();

    node = await startNode({ home });
    client = new WardenClient({ url: node.url, token: node.token });
    // The restarted stage resumes from what its partials hold: the acknowledged frames whole, and
    // of the frame cut off whatever reached its partial (checked against its digest at the end).
    const resumed = await client.stageStatus(stageId);
    const left = new Map(resumed.missing.map((m) => [m.digest, m.byte_len - m.offset]));
    assert.ok(frames.slice(0, 3).every((f) => !left.has(f.digest)), "the acknowledged frames are kept");
    assert.equal(left.size, frames.length - 3);
    const result = await client.push(dir, { bundleId: "killed", revision: "r1" });
    assert.equal(result.stageId, stageId, "the same stage resumed");
    assert.equal(result.receipt.manifest_digest, compiled.manifest.manifest_digest);
    assert.equal(result.bytesSent, [...left.values()].reduce((a, b) => a + b, 0), "only what the node lacked is sent");
    const manifest = await client.bundleManifest("killed", "r1");
    assert.equal(manifest.manifest_digest, compiled.manifest.manifest_digest);
    client.close();
  });
});
