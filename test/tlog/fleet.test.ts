/**
 * The transparency log of a fleet (DESIGN.md "Transparency"): every node of a PostgreSQL fleet
 * appends to one log and signs its checkpoints with the fleet's key.
 *
 * In one process: a node whose checkpoint a witness finds older than one another node already
 * had cosigned is not in error; a node started under another origin than the log's is refused.
 * Then two real `warden serve --postgres` processes run and commit at once, and the fleet's log,
 * read back through either node, is one sequence that a witness (in this process, behind one
 * counting listener per node) cosigns from both, and that the CLI verifies.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http from "node:http";
import * as path from "node:path";
import { createHash, randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { EmbeddedKeyStore } from "../../src/backends/embedded/journal/key-store.js";
import { openPool, type PgPool } from "../../src/backends/postgres/connection.js";
import { openPostgresBackend } from "../../src/backends/postgres/index.js";
import { PostgresKeyStore } from "../../src/backends/postgres/key-store.js";
import { PostgresLogStore } from "../../src/backends/postgres/log-store.js";
import { migrate } from "../../src/backends/postgres/schema.js";
import { ensurePrivateDirSync } from "../../src/storage/secure-fs.js";
import { parseCheckpointText } from "../../src/tlog/checkpoint.js";
import { verifierFor } from "../../src/tlog/cosignature.js";
import { TransparencyLog } from "../../src/tlog/log.js";
import { appendNodes, leafHash, nodeKey, treeHash } from "../../src/tlog/merkle.js";
import { formatVkey, parseNote, parseVkey, SIG_ED25519 } from "../../src/tlog/note.js";
import { parsePolicy, verifyCheckpoint } from "../../src/tlog/policy.js";
import { leafOf, type Statement } from "../../src/tlog/statements.js";
import { verifyCheckpointConsistency, verifyLoggedRun, type RunProofDocument } from "../../src/tlog/verify.js";
import { SqliteWitnessStore } from "../../src/witness/store.js";
import { Witness } from "../../src/witness/witness.js";
import { witnessHandler } from "../../src/witness/server.js";
import { openLog } from "../../src/warden/transparency.js";
import { openWarden } from "../../src/warden/facade.js";
import { buildManifest } from "../delivery/manifest-fixtures.js";
import { fullBundleFiles } from "../providers/helpers.js";
import { fixtureAgents, httpCall, startNode, warden, type HttpReply, type NodeProcess } from "../support/node.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { LONG_TEST_MS, waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

const ORIGIN = "fleet.test/log";
const WITNESS = "witness.test/fleet";
const TOKEN = "fleet-log-operator-token-0123456789abcdef";

interface CountingWitness {
  readonly vkey: string;
  /** one listener per name, each keeping the statuses it answered */
  readonly urls: Record<string, string>;
  readonly statuses: Record<string, number[]>;
  /** holds the requests of `name` until the returned function is called */
  hold(name: string): () => void;
  stop(): Promise<void>;
}

/** The in-process witness of the log `logVkey`, reached by each of `names` on a listener of its own. */
async function startWitness(dir: string, logVkey: string, names: readonly string[]): Promise<CountingWitness> {
  ensurePrivateDirSync(dir, { create: true, recursive: true });
  const store = new SqliteWitnessStore(dir);
  const witness = new Witness({ name: WITNESS, key: await new EmbeddedKeyStore(path.join(dir, "keys")).active(), logs: [parseVkey(logVkey, verifierFor)], store });
  const handler = witnessHandler(witness, [ORIGIN]);
  const statuses: Record<string, number[]> = {};
  const gates: Record<string, Promise<void>> = {};
  const urls: Record<string, string> = {};
  const servers: http.Server[] = [];
  for (const name of names) {
    statuses[name] = [];
    gates[name] = Promise.resolve();
    const server = http.createServer((req, res) => {
      res.on("finish", () => statuses[name]!.push(res.statusCode));
      void gates[name]!.then(() => handler(req, res));
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    urls[name] = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    servers.push(server);
  }
  return {
    vkey: witness.vkey,
    urls,
    statuses,
    hold(name) {
      let release!: () => void;
      gates[name] = new Promise((r) => (release = r));
      return release;
    },
    async stop() {
      for (const server of servers) {
        server.closeAllConnections();
        await new Promise((done) => server.close(done));
      }
      store.close();
    },
  };
}

const filler = (tag: string): Statement => ({ v: 1, type: "bundle.committed", bundle_id: "fleet-filler", revision: tag, bundle_digest: `sha256:${"a".repeat(64)}`, manifest_digest: `sha256:${"b".repeat(64)}` });

describe("the fleet's log, two nodes in one process", () => {
  let pg: TestPostgres;
  let root: string;
  before(async () => {
    pg = await startTestPostgres();
    root = tempDir("tlog-fleet-inproc");
  });
  after(async () => {
    await pg?.stop();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  it("a witness that already cosigned another node's larger checkpoint answers 409 to a smaller one: done, not an error", async (t) => {
    const url = await pg.createDatabase("witness-ahead");
    const pools: PgPool[] = [openPool({ url }, 4), openPool({ url }, 4)];
    t.after(async () => {
      for (const p of pools) await p.end();
    });
    await migrate(pools[0]!);
    const keys = new PostgresKeyStore(pools[0]!);
    const key = await keys.active();
    const witness = await startWitness(path.join(root, "witness-ahead"), formatVkey(ORIGIN, SIG_ED25519, key.public_key), ["a", "b"]);
    t.after(() => witness.stop());
    const open = (name: "a" | "b", pool: PgPool): TransparencyLog =>
      new TransparencyLog({
        store: new PostgresLogStore(pool),
        origin: ORIGIN,
        key: () => keys.active(),
        checkpointIntervalMs: 3_600_000,
        witnesses: [{ name: WITNESS, url: witness.urls[name]!, verifier: parseVkey(witness.vkey, verifierFor) }],
      });
    const [a, b] = [open("a", pools[0]!), open("b", pools[1]!)];
    const release = witness.hold("a");
    await a.append(filler("1"));
    assert.equal((await a.checkpoint()).size, 1);
    // A's submission of size 1 waits at the witness while B signs and gets size 2 cosigned.
    await b.append(filler("2"));
    assert.equal((await b.checkpoint()).size, 2);
    await b.witnessed();
    assert.deepEqual(witness.statuses.b, [200]);
    release();
    await a.witnessed();
    assert.deepEqual(witness.statuses.a, [409], "the witness was ahead of A's checkpoint");
    const status = await a.status();
    assert.equal(status.witnesses[0]!.last_error, undefined, "A has nothing left to submit");
    assert.equal(status.witnesses[0]!.size, 2);
    assert.equal(status.witnesses[0]!.behind, 0);
  });

  it("a node started under another origin than the log's checkpoints is refused, on a fleet and on an embedded home", async (t) => {
    const url = await pg.createDatabase("origin");
    const pool = openPool({ url }, 4);
    t.after(() => pool.end());
    await migrate(pool);
    const keys = new PostgresKeyStore(pool);
    const first = await openLog(new PostgresLogStore(pool), keys, { origin: ORIGIN });
    await first.log.close();
    await assert.rejects(openLog(new PostgresLogStore(pool), keys, { origin: "other.test/log" }), (e: unknown) => (e as { code?: string }).code === "log-origin-mismatch");
    // The default origin is the fleet's first key's: a node with no --log-origin is refused too.
    await assert.rejects(openLog(new PostgresLogStore(pool), keys, {}), (e: unknown) => (e as { code?: string }).code === "log-origin-mismatch");
    const again = await openLog(new PostgresLogStore(pool), keys, { origin: ORIGIN });
    assert.equal(again.log.origin, ORIGIN);
    await again.log.close();

    const home = path.join(root, "embedded-origin");
    await (await openWarden({ home, log: { origin: ORIGIN } })).close();
    await assert.rejects(openWarden({ home, log: { origin: "other.test/log" } }), (e: unknown) => (e as { code?: string }).code === "log-origin-mismatch");
    await (await openWarden({ home, log: { origin: ORIGIN } })).close();
  });
});

describe("the fleet's log: two warden serve processes on one PostgreSQL", { timeout: LONG_TEST_MS }, () => {
  let pg: TestPostgres;
  let url: string;
  let root: string;
  let witness: CountingWitness;
  let logVkey: string;
  const nodes: Record<"a" | "b", NodeProcess | undefined> = { a: undefined, b: undefined };
  /** every checkpoint each node served while the fleet worked (a node's repeats left out), by the node that served it */
  const seen: { node: "a" | "b"; note: string }[] = [];
  let polling = true;
  let poller: Promise<void> | undefined;
  /** the runs the first test recorded, in the order they were recorded */
  const runs: string[] = [];

  const node = (name: "a" | "b"): NodeProcess => nodes[name]!;
  const call = (name: "a" | "b", method: string, route: string, body?: unknown): Promise<HttpReply> =>
    httpCall(node(name).url, TOKEN, method, route, body === undefined ? {} : { body });

  before(async () => {
    pg = await startTestPostgres();
    url = await pg.createDatabase("tlog-fleet");
    root = tempDir("tlog-fleet");
    // The fleet's key exists before the nodes, so the witness can be told the log's key.
    const backend = await openPostgresBackend({ url });
    logVkey = formatVkey(ORIGIN, SIG_ED25519, (await backend.keys.active()).public_key);
    await backend.close();
    witness = await startWitness(path.join(root, "witness"), logVkey, ["a", "b"]);
    const start = (name: "a" | "b"): Promise<NodeProcess> => {
      const workspace = path.join(root, `${name}-workspace`);
      fs.mkdirSync(workspace, { recursive: true });
      return startNode({
        home: path.join(root, name),
        args: [
          ...["--postgres", url, "--provider", `claude=${path.join(fixtureAgents, "claude.mjs")}`, "--workspace", `main=${workspace}`, "--log-level", "warn"],
          ...["--log-origin", ORIGIN, "--witness", `${WITNESS}=${witness.urls[name]!}`, "--witness-key", witness.vkey],
        ],
        env: { WARDEN_TOKEN: TOKEN },
      });
    };
    [nodes.a, nodes.b] = await Promise.all([start("a"), start("b")]);
    poller = (async () => {
      while (polling) {
        for (const name of ["a", "b"] as const) {
          const res = await call(name, "GET", "/v1/log/checkpoint");
          if (res.status === 200 && seen.findLast((s) => s.node === name)?.note !== res.text) seen.push({ node: name, note: res.text });
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
  });

  after(async () => {
    polling = false;
    await poller?.catch(() => undefined);
    await nodes.a?.kill();
    await nodes.b?.kill();
    await witness?.stop();
    await pg?.stop();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  /** Runs an invocation on `name` to its recorded result; answers its run id. */
  const run = async (name: "a" | "b"): Promise<string> => {
    const key = randomUUID();
    const started = await httpCall(node(name).url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": key }, body: { provider: "claude", prompt: `fleet log ${key}` } });
    assert.equal(started.status, 202, started.text);
    return waitFor(`run ${key} on node ${name} to be recorded`, async () => {
      const state = await call(name, "GET", `/v1/invocations/api:operator/${key}`);
      return state.body.status === "recorded" ? (state.body.run_id as string) : undefined;
    });
  };
  const commit = async (name: "a" | "b", bundle: string): Promise<void> => {
    const { manifest, blobs } = buildManifest(fullBundleFiles(), bundle, "r1");
    const begun = await call(name, "POST", "/v1/stages", manifest);
    assert.equal(begun.status, 201, begun.text);
    for (const m of begun.body.missing as { digest: string }[]) {
      const res = await httpCall(node(name).url, TOKEN, "PATCH", `/v1/stages/${begun.body.stage_id as string}/blobs/${m.digest}`, {
        raw: blobs.get(m.digest as `sha256:${string}`)!,
        headers: { "content-type": "application/octet-stream", "upload-offset": "0" },
      });
      assert.equal(res.status, 204, res.text);
    }
    const done = await call(name, "POST", `/v1/stages/${begun.body.stage_id as string}/commit`);
    assert.equal(done.status, 200, done.text);
  };
  /** Both nodes see every leaf checkpointed and the witness at that checkpoint. */
  const settled = (): Promise<number> =>
    waitFor("the fleet's latest checkpoint to cover the log and be cosigned", async () => {
      const [sa, sb] = await Promise.all([call("a", "GET", "/v1/log"), call("b", "GET", "/v1/log")]);
      const ok = (s: HttpReply): boolean => {
        const w = (s.body.witnesses as { size: number; behind: number }[])[0]!;
        return s.body.checkpoint_size === s.body.size && w.behind === 0 && w.size === s.body.size;
      };
      return ok(sa) && ok(sb) && sa.body.size === sb.body.size ? (sa.body.size as number) : undefined;
    });

  it("both nodes append at once: one sequence 0..n-1, every seal proven to a cosigned checkpoint, every pair of checkpoints consistent", async () => {
    const bundles: string[] = [];
    const wave = async (perNode: Record<"a" | "b", number>, withBundles: boolean): Promise<void> => {
      const work: Promise<unknown>[] = [];
      for (const name of ["a", "b"] as const) {
        for (let i = 0; i < perNode[name]; i++) work.push(run(name).then((id) => runs.push(id)));
        if (withBundles && perNode[name] > 0) {
          const bundle = `fleet-log-${name}-${bundles.length}`;
          bundles.push(bundle);
          work.push(commit(name, bundle));
        }
      }
      await Promise.all(work);
      await settled();
    };
    // At once on both; then each alone, so each node certainly signs (and submits) a checkpoint; then at once again.
    await wave({ a: 8, b: 8 }, true);
    await wave({ a: 2, b: 0 }, false);
    await wave({ a: 0, b: 2 }, false);
    await wave({ a: 6, b: 6 }, true);
    const size = await settled();
    polling = false;
    await poller;

    // The leaves, as a monitor reads them through node B's entry bundles: each expected statement once, nothing else.
    const leaves: Buffer[] = [];
    for (let tile = 0; tile * 256 < size; tile++) {
      const width = Math.min(256, size - tile * 256);
      const res = await fetch(`${node("b").url}/v1/log/tile/entries/${String(tile).padStart(3, "0")}${width === 256 ? "" : `.p/${width}`}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(res.status, 200);
      const bundle = Buffer.from(await res.arrayBuffer());
      for (let at = 0; at < bundle.byteLength; at += 2 + bundle.readUInt16BE(at)) leaves.push(bundle.subarray(at + 2, at + 2 + bundle.readUInt16BE(at)));
    }
    assert.equal(leaves.length, size);
    const keys = leaves.map((l) => leafOf(JSON.parse(l.toString("utf8")) as Statement).key);
    const expected = [...runs.map((r) => `run:${r}`), ...bundles.map((b) => `bundle:${b}@r1`)];
    assert.equal(new Set(keys).size, size, "no statement twice");
    assert.deepEqual(keys.filter((k) => !k.startsWith("key:")).sort(), expected.sort(), "every run's seal and every commit, nothing else");
    assert.equal(keys.filter((k) => k.startsWith("key:")).length, 1, "the fleet's one key");

    // The latest checkpoint's root is the tree of exactly these leaves, in this order.
    const latest = (await call("a", "GET", "/v1/log/checkpoint")).text;
    const nodes = new Map(appendNodes(0, new Map(), leaves.map((l) => leafHash(l))).map((n) => [nodeKey(n.level, n.index), n.hash]));
    assert.deepEqual(parseCheckpointText(parseNote(latest).text).root, treeHash(size, (level, index) => nodes.get(nodeKey(level, index))!));

    // Each run's seal, asked of the node that did not run it too, verifies under a policy that requires the witness.
    const policy = parsePolicy(`log ${logVkey}\nwitness w ${witness.vkey}\nquorum w\n`);
    for (const [i, runId] of runs.entries()) {
      const at = i % 2 === 0 ? "a" : "b";
      const proof = await call(at, "GET", `/v1/log/runs/${runId}`);
      assert.equal(proof.status, 200, proof.text);
      const journal = Buffer.from(await (await fetch(`${node(at).url}/v1/runs/${runId}/journal`, { headers: { authorization: `Bearer ${TOKEN}` } })).arrayBuffer());
      assert.equal(verifyLoggedRun(journal, runId, proof.body as unknown as RunProofDocument, policy).statement.run_id, runId);
    }

    // Every pair of checkpoints either node served is consistent; one size always has one checkpoint.
    const logs = [parseVkey(logVkey, verifierFor)];
    const bySize = new Map<number, string>();
    for (const { note } of seen) {
      const cp = parseCheckpointText(parseNote(note).text);
      const signed = note.split("\n\n")[1]!.split("\n")[0]!;
      const other = bySize.get(cp.size);
      if (other !== undefined) assert.equal(other.split("\n\n")[1]!.split("\n")[0], signed, `size ${cp.size} was signed once`);
      else bySize.set(cp.size, note);
      verifyCheckpoint(note, parsePolicy(`log ${logVkey}\nquorum none\n`));
    }
    // Enough sizes for the pairs to mean something; each node served some of them.
    assert.ok(new Set(seen.map((s) => s.node)).size === 2 && bySize.size >= 3, `checkpoints seen: ${seen.map((s) => s.node).join("")}, sizes ${[...bySize.keys()].join(" ")}`);
    const sizes = [...bySize.keys()].sort((x, y) => x - y);
    for (const [i, old] of sizes.entries()) {
      for (const [j, next] of sizes.slice(i + 1).entries()) {
        const proof = await call((i + j) % 2 === 0 ? "a" : "b", "GET", `/v1/log/proof/consistency/${old}/${next}`);
        assert.equal(proof.status, 200, proof.text);
        verifyCheckpointConsistency(bySize.get(old)!, bySize.get(next)!, proof.body.proof as string[], logs);
      }
    }

    // The witness cosigned checkpoints submitted by both nodes, and refused none (409 only says "you are behind me").
    for (const name of ["a", "b"] as const) {
      assert.ok(witness.statuses[name]!.includes(200), `node ${name}'s checkpoints were cosigned: ${witness.statuses[name]!.join(" ")}`);
      assert.deepEqual(witness.statuses[name]!.filter((s) => s !== 200 && s !== 409), [], `node ${name}: no refusal`);
      const status = await call(name, "GET", "/v1/log");
      assert.equal((status.body.witnesses as { last_error?: string }[])[0]!.last_error, undefined);
    }
    const witnessed = await fetch(`${witness.urls.a!}/${createHash("sha256").update(ORIGIN).digest("hex")}/checkpoint`);
    assert.equal(parseCheckpointText(parseNote(await witnessed.text()).text).size, size);
  });

  it("warden journal verify --policy and warden log verify, pointed at either node of the fleet", async () => {
    // A run of the concurrent wave (recorded on either node), asked of node A.
    const runId = runs[3]!;
    const policy = path.join(root, "policy.txt");
    fs.writeFileSync(policy, `log ${logVkey}\nwitness w ${witness.vkey}\nquorum w\n`);
    const verified = await warden(["journal", "verify", runId, "--policy", policy], { env: { WARDEN_URL: node("a").url, WARDEN_TOKEN: TOKEN } });
    assert.equal(verified.code, 0, verified.stderr);
    assert.match(verified.stdout, new RegExp(`LOGGED run ${runId}: leaf \\d+ of ${ORIGIN} at size \\d+, cosigned by w`));
    const [first, last] = [seen[0]!.note, seen.at(-1)!.note];
    fs.writeFileSync(path.join(root, "old.txt"), first);
    fs.writeFileSync(path.join(root, "new.txt"), last);
    const consistent = await warden(["log", "verify", path.join(root, "old.txt"), path.join(root, "new.txt"), "--policy", policy], { env: { WARDEN_URL: node("b").url, WARDEN_TOKEN: TOKEN } });
    assert.equal(consistent.code, 0, consistent.stderr);
    assert.match(consistent.stdout, /^OK fleet\.test\/log: the tree of size \d+ is a prefix of the tree of size \d+/);
  });
});
