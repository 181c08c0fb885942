/**
 * `warden apply` and `warden attest` against a real node running a real (fixture) agent in a git
 * workspace: every kind of change goes from the run's worktree, as the agent left it, through the
 * stored change set to a clean checkout of the base, byte for byte and mode for mode; a change set
 * one byte off — on the node's disk, or on the way (a tampering proxy: the CLI's own checks) — is
 * refused naming why, with nothing written; the attestation verifies with securesystemslib with the
 * key of /v1/keys, and a changed byte fails it.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { canonicalJson } from "../../src/core/canonical.js";
import { OPERATOR, OPERATOR_TOKEN, json, openTestNode, type TestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";
import { waitFor } from "../support/wait.js";
import { verifyWithSecuresystemslib } from "../attestation/intoto-verifier.js";
import { b64, editingAgent, git, makeRepo, prompt, type Op } from "./helpers.js";
import { treeDifferences, treeOf } from "./trees.js";
import { wardenInProcess } from "../support/cli.js";

/** Beside the editing agent: copies the tree it leaves (its .git file aside) to $WARDEN_FIXTURE_SNAPSHOT/<worktree name> as it exits. */
const SNAPSHOT_AGENT = `#!/usr/bin/env node
import { cpSync } from "node:fs";
import { basename, join } from "node:path";
const cwd = process.cwd();
process.on("exit", () => cpSync(cwd, join(process.env.WARDEN_FIXTURE_SNAPSHOT, basename(cwd)), { recursive: true, verbatimSymlinks: true, filter: (src) => !/(^|\\/)\\.git$/.test(src) }));
await import("./editing-agent.mjs");
`;

const EVERY_KIND: Op[] = [
  { op: "write", path: "a.txt", base64: b64("one\n2\nthree\nfour\n") },
  { op: "rm", path: "gone.txt" },
  { op: "mv", from: "move.txt", to: "sub/moved.txt" },
  { op: "chmod", path: "run.sh", mode: 0o755 },
  { op: "write", path: "new/deep/untracked.txt", base64: b64("fresh\n") },
  { op: "write", path: "blob.bin", base64: b64(Buffer.from([0, 9, 8, 7, 0, 255, 254])) },
  { op: "write", path: "tool.sh", base64: b64("#!/bin/sh\necho tool\n"), mode: 0o755 },
  { op: "rm", path: "link" },
  { op: "symlink", target: "run.sh", path: "link" },
  { op: "symlink", target: "new/deep/untracked.txt", path: "new-link" },
  { op: "write", path: "empty", base64: "" },
];

type Mutate = (path: string, body: Buffer) => Buffer;

/** An HTTP proxy to the node that lets `mutate` change answers' bodies: what a hostile network or node could serve. */
async function tamperingProxy(target: string, mutate: Mutate): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const upstream = http.request(new URL(req.url ?? "/", target), { method: req.method, headers: { ...req.headers, host: new URL(target).host } }, (answer) => {
      const chunks: Buffer[] = [];
      answer.on("data", (c: Buffer) => chunks.push(c));
      answer.on("end", () => {
        const body = mutate(req.url ?? "", Buffer.concat(chunks));
        const headers = { ...answer.headers, "content-length": String(body.length) };
        delete headers["transfer-encoding"];
        res.writeHead(answer.statusCode ?? 502, headers).end(body);
      });
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function flipLastByte(body: Buffer): Buffer {
  const copy = Buffer.from(body);
  copy[copy.length - 1] = copy[copy.length - 1]! ^ 0x01;
  return copy;
}

describe("warden apply and warden attest of a run in a git workspace", () => {
  let root: string;
  let repo: string;
  let base: string;
  let snapshots: string;
  let node: TestNode;
  let url: string;
  let runId: string;

  before(async () => {
    root = tempDir("apply-attest");
    repo = join(root, "workspace");
    base = makeRepo(repo);
    editingAgent(join(root, "agents"));
    const snapshotAgent = join(root, "agents", "snapshot-agent.mjs");
    fs.writeFileSync(snapshotAgent, SNAPSHOT_AGENT, { mode: 0o755 });
    snapshots = join(root, "snapshots");
    fs.mkdirSync(snapshots);
    node = await openTestNode(root, {
      warden: {
        providers: { claude: { command: snapshotAgent } },
        agentEnv: { PATH: process.env.PATH, WARDEN_FIXTURE_SNAPSHOT: snapshots },
        log: { checkpointIntervalMs: 10 },
      },
    });
    await node.app.listen({ host: "127.0.0.1", port: 0 });
    url = `http://127.0.0.1:${(node.app.server.address() as AddressInfo).port}`;
    const started = await node.warden.start("api:alice", randomUUID(), { provider: "claude", prompt: prompt(EVERY_KIND), timeout_s: 120 });
    assert.equal(started.status, "started");
    if (started.status !== "started") return;
    runId = started.run_id;
    const outcome = await started.done;
    assert.equal(outcome.status, "recorded", JSON.stringify(outcome));
  });
  after(async () => {
    await node.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  async function cli(args: string[], via = url): Promise<{ code: number | null; out: string; err: string }> {
    const run = await wardenInProcess(args, { env: { WARDEN_URL: via, WARDEN_TOKEN: OPERATOR_TOKEN }, cwd: root });
    return { code: run.code, out: run.stdout, err: run.stderr };
  }

  /** A clean checkout of the run's base, as an operator makes one. */
  function checkout(name: string): string {
    const dir = join(root, name);
    git(repo, "worktree", "add", "--detach", "-q", dir, base);
    return dir;
  }

  const get = (path: string) => node.app.inject({ url: path, headers: OPERATOR });

  it("turns a clean checkout of the base into the run's worktree: every file's bytes and mode, symlinks, deletions, renames", async () => {
    const worktree = treeOf(join(snapshots, runId));
    const target = checkout("applied");
    const applied = await cli(["apply", runId, "--to", target]);
    assert.equal(applied.code, 0, applied.out + applied.err);
    assert.match(applied.out, new RegExp(`^applied change set sha256:[0-9a-f]{64} of run ${runId} \\(base ${base}\\)`, "m"));
    assert.deepEqual(treeDifferences(worktree, treeOf(target)), []);
    // git agrees: the applied checkout differs from the base exactly as the run's change set says.
    const manifest = json((await get(`/v1/runs/${runId}/changes`)).payload).manifest as { files: { path: string; status: string }[] };
    assert.deepEqual(
      manifest.files.map((f) => `${f.status} ${f.path}`),
      ["modified a.txt", "modified blob.bin", "added empty", "deleted gone.txt", "modified link", "added new-link", "added new/deep/untracked.txt", "modified run.sh", "renamed sub/moved.txt", "added tool.sh"],
    );
    assert.equal(git(target, "status", "--porcelain", "--untracked-files=all").split("\n").filter((l) => l !== "").length > 0, true);

    // --policy: the journal that names the change set is the one the log holds.
    const { vkey } = json((await get("/v1/log")).payload) as { vkey: string };
    await waitFor("the run's seal in a checkpoint", async () => ((await get(`/v1/log/runs/${runId}`)).statusCode === 200 ? true : undefined));
    const policy = join(root, "policy.txt");
    fs.writeFileSync(policy, `log ${vkey}\nquorum none\n`);
    const logged = await cli(["apply", runId, "--to", checkout("applied-logged"), "--policy", policy]);
    assert.equal(logged.code, 0, logged.out + logged.err);
    assert.match(logged.out, new RegExp(`^LOGGED run ${runId}: leaf \\d+ of `, "m"));
  });

  it("refuses a change set one byte off, naming why, and writes nothing", async () => {
    const manifest = json((await get(`/v1/runs/${runId}/changes`)).payload).manifest as { files: { path: string; new_sha256: string | null }[] };
    const aTxt = manifest.files.find((f) => f.path === "a.txt")!.new_sha256!;

    // On the node's disk: the node's own read refuses it, and the CLI says so.
    const blobFile = join(node.home, "changes", "blobs", aTxt.slice(7));
    const original = fs.readFileSync(blobFile);
    fs.chmodSync(blobFile, 0o600);
    fs.writeFileSync(blobFile, flipLastByte(original));
    try {
      const target = checkout("tampered-on-disk");
      const before = treeOf(target);
      const refused = await cli(["apply", runId, "--to", target]);
      assert.equal(refused.code, 1, refused.out);
      assert.match(refused.err, /^warden: .*\(change-set-blob-tampered\)$/m);
      assert.deepEqual(treeDifferences(before, treeOf(target)), []);
    } finally {
      fs.writeFileSync(blobFile, original);
    }

    // On the way: the CLI's own checks, whatever the node (or a proxy) serves.
    const cases: { name: string; mutate: Mutate; code: string }[] = [
      { name: "a blob", mutate: (path, body) => (path.includes("/changes/blobs/") ? flipLastByte(body) : body), code: "change-set-blob-tampered" },
      {
        name: "the manifest",
        mutate: (path, body) => (path.endsWith(`/runs/${runId}/changes`) ? Buffer.from(body.toString("utf8").replace('"lines_added":2', '"lines_added":3')) : body),
        code: "change-set-digest-mismatch",
      },
      { name: "the journal", mutate: (path, body) => (path.endsWith("/journal") ? Buffer.from(body.toString("utf8").replace('"completed"', '"completeD"')) : body), code: "apply-journal-invalid" },
    ];
    for (const c of cases) {
      const proxy = await tamperingProxy(url, c.mutate);
      try {
        const target = checkout(`tampered-${c.code}`);
        const before = treeOf(target);
        const refused = await cli(["apply", runId, "--to", target], proxy.url);
        assert.equal(refused.code, 1, `${c.name}: ${refused.out}${refused.err}`);
        assert.match(refused.err, new RegExp(`^warden: .*\\(${c.code}\\)$`, "m"), c.name);
        assert.deepEqual(treeDifferences(before, treeOf(target)), [], `${c.name}: the target was changed`);
      } finally {
        await proxy.close();
      }
    }
  });

  it("attests the change set: securesystemslib verifies the envelope with the key of /v1/keys; a changed byte fails", async () => {
    const attested = await cli(["attest", runId]);
    assert.equal(attested.code, 0, attested.err);
    const envelopeText = attested.out.trimEnd();
    const keys = json((await get("/v1/keys")).payload);
    const verdict = await verifyWithSecuresystemslib(root, envelopeText, keys);
    assert.equal(verdict.ok, true, `${verdict.error ?? ""} ${verdict.stderr}`);

    const statement = verdict.statement as { _type: string; subject: { name: string; digest: { sha256: string } }[]; predicateType: string; predicate: Record<string, any> };
    assert.equal(statement._type, "https://in-toto.io/Statement/v1");
    assert.equal(statement.predicateType, "https://warden.dev/attestation/run/v1");
    // The subject is the change set: the sha256 of the manifest's canonical bytes, as the node serves it.
    const served = json((await get(`/v1/runs/${runId}/changes`)).payload);
    const manifestSha = createHash("sha256").update(canonicalJson(served.manifest)).digest("hex");
    assert.deepEqual(statement.subject, [{ name: `warden:run/${runId}/changes`, digest: { sha256: manifestSha } }]);
    assert.equal(`sha256:${manifestSha}`, served.change_set);
    const p = statement.predicate;
    assert.equal(p.run_id, runId);
    assert.deepEqual(p.changes, { digest: served.change_set, base_commit: base, files: 10 });
    assert.deepEqual(p.provider, { name: "claude", cli_version: "2.1.197" });
    assert.equal(p.isolation.kind, "none");
    assert.equal(p.termination, "completed");
    const journal = (await get(`/v1/runs/${runId}/journal`)).rawPayload;
    const lines = journal.toString("utf8").split("\n").filter((l) => l !== "");
    assert.equal(p.journal.entries, lines.length);
    assert.equal(p.journal.head, createHash("sha256").update(`${lines.at(-1)}\n`).digest("hex"));
    const proof = json((await get(`/v1/log/runs/${runId}`)).payload) as { index: number; leaf: string };
    assert.deepEqual(p.log, {
      origin: json((await get("/v1/log")).payload).origin,
      index: proof.index,
      leaf_hash: createHash("sha256").update(Buffer.concat([Buffer.from([0]), Buffer.from(proof.leaf, "utf8")])).digest("hex"),
      statement: "run.sealed",
    });
    // The API serves the same envelope.
    assert.deepEqual(json((await get(`/v1/runs/${runId}/attestation`)).payload), JSON.parse(envelopeText));

    // One byte changed in the payload (the base commit's first digit) fails the check.
    const envelope = JSON.parse(envelopeText) as { payload: string };
    const payload = Buffer.from(envelope.payload, "base64").toString("utf8");
    const forged = payload.replace(`"base_commit":"${base}"`, `"base_commit":"${base[0] === "0" ? "1" : "0"}${base.slice(1)}"`);
    assert.notEqual(forged, payload);
    const tampered = JSON.stringify({ ...envelope, payload: Buffer.from(forged).toString("base64") });
    const refused = await verifyWithSecuresystemslib(root, tampered, keys);
    assert.equal(refused.ok, false);
    assert.equal(refused.exitCode, 1);
  });
});
