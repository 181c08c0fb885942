/**
 * Reading a change set over HTTP and with the CLI (DESIGN.md "Change sets", "HTTP API v1"):
 * the manifest and its digest, the stat form, the blobs, problem+json for a run without a change
 * set and for an unknown run, a damaged stored copy refused by digest while the node keeps serving.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { openTestNode, OBSERVER, OPERATOR_TOKEN } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";
import { canonicalJson } from "../../src/core/canonical.js";
import { sha256Digest, type Digest } from "../../src/core/digest.js";
import { parseManifest, type ChangeSetManifest } from "../../src/changes/format.js";
import { b64, editingAgent, makeRepo, prompt } from "./helpers.js";
import { wardenInProcess } from "../support/cli.js";

test("GET /v1/runs/{id}/changes, ?stat, blobs, their problems, and `warden changes`", async (t) => {
  const root = tempDir("changes-api");
  const repo = join(root, "repo");
  makeRepo(repo);
  const plain = join(root, "plain");
  fs.mkdirSync(plain);
  const node = await openTestNode(root, {
    warden: { workspaces: { repo, plain }, defaultWorkspace: "repo", providers: { claude: { command: editingAgent(join(root, "agents")) } } },
  });
  t.after(async () => {
    await node.close();
    fs.rmSync(root, { recursive: true, force: true });
  });
  const ops = [
    { op: "write" as const, path: "a.txt", base64: b64("one\nTWO\nthree\n") },
    { op: "rm" as const, path: "gone.txt" },
    { op: "write" as const, path: "new.bin", base64: b64(Buffer.from([0, 1, 0, 2])) },
  ];
  const started = await node.warden.start("api:alice", randomUUID(), { provider: "claude", prompt: prompt(ops) });
  assert.ok(started.status === "started");
  assert.equal((await started.done).status, "recorded");
  const runId = started.run_id;

  // Observers read it too: a change set is part of the run's record.
  const full = await node.app.inject({ method: "GET", url: `/v1/runs/${runId}/changes`, headers: OBSERVER });
  assert.equal(full.statusCode, 200, full.body);
  const body = full.json() as { change_set: Digest; manifest: ChangeSetManifest };
  const manifest = parseManifest(Buffer.from(canonicalJson(body.manifest)), body.change_set);
  assert.deepEqual(manifest.files.map((f) => [f.path, f.status]), [["a.txt", "modified"], ["gone.txt", "deleted"], ["new.bin", "added"]]);

  const stat = await node.app.inject({ method: "GET", url: `/v1/runs/${runId}/changes?stat`, headers: OBSERVER });
  assert.equal(stat.statusCode, 200, stat.body);
  const s = stat.json() as { files_total: number; lines_added: number; lines_deleted: number; files: { binary: boolean }[] };
  assert.deepEqual([s.files_total, s.lines_added, s.lines_deleted, s.files[2]!.binary], [3, 1, 2, true]);

  const patch = await node.app.inject({ method: "GET", url: `/v1/runs/${runId}/changes/blobs/${manifest.patch.sha256}`, headers: OBSERVER });
  assert.equal(patch.statusCode, 200);
  assert.equal(sha256Digest(patch.rawPayload), manifest.patch.sha256);
  assert.match(patch.body, /GIT binary patch/);

  const problem = async (url: string, status: number, code: string) => {
    const reply = await node.app.inject({ method: "GET", url, headers: OBSERVER });
    assert.equal(reply.statusCode, status, reply.body);
    assert.match(String(reply.headers["content-type"]), /^application\/problem\+json/);
    assert.equal((reply.json() as { code: string }).code, code);
  };
  await problem(`/v1/runs/${randomUUID()}/changes`, 404, "run-changes-not-found");
  await problem(`/v1/runs/${runId}/changes/blobs/${sha256Digest("not in this change set")}`, 404, "run-changes-blob-not-found");
  await problem(`/v1/runs/${runId}/changes/blobs/sha256:XYZ`, 400, "digest-invalid");
  const plainRun = await node.warden.start("api:alice", randomUUID(), { provider: "claude", prompt: "nothing", workspace: "plain" });
  assert.ok(plainRun.status === "started");
  await plainRun.done;
  await problem(`/v1/runs/${plainRun.run_id}/changes`, 404, "run-changes-not-found");

  // The CLI, over real HTTP: the stat, and the patch checked against the digest.
  await node.app.listen({ host: "127.0.0.1", port: 0 });
  const url = `http://127.0.0.1:${(node.app.server.address() as AddressInfo).port}`;
  const cli = (...args: string[]) => wardenInProcess(args, { env: { WARDEN_URL: url, WARDEN_TOKEN: OPERATOR_TOKEN }, cwd: root });
  const statOut = await cli("changes", runId, "--stat");
  assert.equal(statOut.code, 0, statOut.stderr);
  assert.match(statOut.stdout, /a\.txt\s+\| modified +\+1 -1/);
  assert.match(statOut.stdout, /new\.bin\s+\| added +binary/);
  assert.match(statOut.stdout, /3 file\(s\) changed, 1 insertion\(s\)\(\+\), 2 deletion\(s\)\(-\)/);
  const patchOut = await cli("changes", runId);
  assert.equal(patchOut.code, 0, patchOut.stderr);
  assert.equal(patchOut.stdout, patch.body);
  const none = await cli("changes", plainRun.run_id);
  assert.equal(none.code, 1);
  assert.match(none.stderr, /^warden: .*\(run-changes-not-found\)\n$/);

  // One byte of the stored manifest changed: refused by digest, by the API and by the CLI; the node keeps serving.
  const stored = join(node.home, "changes", "sets", `${body.change_set.slice(7)}.json`);
  const bytes = fs.readFileSync(stored);
  bytes[bytes.indexOf("a.txt")] = "b".charCodeAt(0);
  fs.writeFileSync(stored, bytes);
  await problem(`/v1/runs/${runId}/changes`, 500, "change-set-digest-mismatch");
  const tampered = await cli("changes", runId);
  assert.equal(tampered.code, 1);
  assert.match(tampered.stderr, /change-set-digest-mismatch/);
  assert.equal((await node.app.inject({ method: "GET", url: "/healthz" })).statusCode, 200);
});
