/**
 * The real `warden serve` as a child process on a free loopback port with a temp home, driven only
 * through HTTP: every Idempotency-Key status, auth, live SSE events of a run, journal
 * verification, reconciliation, bad input (the node keeps serving and nothing stored changes),
 * a streamed chunk upload, kill -9 mid-run then restart (the run reads unresolved and the agent is
 * never started again), and a graceful SIGTERM that cuts a running agent.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as http from "node:http";
import { randomUUID } from "node:crypto";
import { compileDirectory, type CompiledBundle } from "../../src/delivery/compile/directory.js";
import { fullBundleFiles } from "../providers/helpers.js";
import { isAlive, killGroupIfStillRecorded } from "../support/processes.js";
import { fixtureAgents, httpCall, startNode, type HttpCallOptions, type HttpReply, type NodeProcess } from "../support/node.js";
import { waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";

const OPERATOR_TOKEN = "e2e-operator-token-0123456789abcdef";
const OBSERVER_TOKEN = "e2e-observer-token-0123456789abcdef";

type Reply = HttpReply;

describe("warden serve (child process, HTTP only)", () => {
  let root: string;
  let home: string;
  let workspace: string;
  let startsFile: string;
  let node: NodeProcess;

  const start = (): Promise<NodeProcess> =>
    startNode({
      home,
      args: [
        "--provider",
        `claude=${path.join(fixtureAgents, "claude.mjs")}`,
        "--provider",
        `kimi=${path.join(fixtureAgents, "kimi.mjs")}`,
        "--workspace",
        `main=${workspace}`,
        "--log-level",
        "warn",
      ],
      env: { WARDEN_TOKEN: OPERATOR_TOKEN, WARDEN_OBSERVER_TOKEN: OBSERVER_TOKEN, WARDEN_FIXTURE_STARTS: startsFile },
    });

  const call = (method: string, route: string, options: HttpCallOptions = {}): Promise<Reply> =>
    httpCall(node.url, OPERATOR_TOKEN, method, route, options);
  const invoke = (key: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<Reply> =>
    call("POST", "/v1/invocations", { headers: { ...(key === undefined ? {} : { "idempotency-key": key }), ...headers }, body });
  const stateOf = async (key: string): Promise<Record<string, unknown>> => (await call("GET", `/v1/invocations/api:operator/${key}`)).body;
  const starts = (): { provider: string; pid: number; startTicks?: string }[] =>
    fs.existsSync(startsFile)
      ? fs.readFileSync(startsFile, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as { provider: string; pid: number; startTicks?: string })
      : [];
  /** agents started (the children an agent starts are recorded too, as "grandchild" or "clean-grandchild") */
  const agentStarts = (): { provider: string; pid: number; startTicks?: string }[] => starts().filter((s) => !s.provider.endsWith("grandchild"));
  const startCount = (): number => agentStarts().length;
  const startedPids = (): number[] => agentStarts().map((s) => s.pid);
  const grandchildPids = (kind: "grandchild" | "clean-grandchild" = "grandchild"): number[] =>
    starts()
      .filter((s) => s.provider === kind)
      .map((s) => s.pid);

  before(async () => {
    root = tempDir("e2e-serve");
    home = path.join(root, "home");
    workspace = path.join(root, "workspace");
    fs.mkdirSync(workspace);
    startsFile = path.join(root, "starts.log");
    fs.mkdirSync(home, { mode: 0o700 });
    // A short grace so the SIGTERM test does not wait for the default 10 s.
    fs.writeFileSync(path.join(home, "warden.json"), JSON.stringify({ shutdownGraceS: 1 }), { mode: 0o600 });
    node = await start();
  });
  after(async () => {
    await node.kill();
    // Agents started minutes ago are long gone: their pids may be another test's by now.
    for (const agent of agentStarts()) killGroupIfStillRecorded(agent);
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("publishes node.json and answers /healthz without a token, 401 without one elsewhere, 403 to observers", async () => {
    const published = JSON.parse(fs.readFileSync(path.join(home, "node.json"), "utf8")) as { url: string; pid: number };
    assert.equal(published.url, node.url);
    assert.equal(published.pid, node.child.pid);
    assert.equal((await call("GET", "/healthz", { token: null })).status, 200);
    const anonymous = await call("GET", "/v1/bundles", { token: null });
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.code, "unauthorized");
    assert.equal((await call("GET", "/v1/bundles", { token: "wrong" })).status, 401);
    assert.equal((await call("GET", "/v1/bundles", { token: OBSERVER_TOKEN })).status, 200);
    const observerInvoke = await call("POST", "/v1/invocations", { token: OBSERVER_TOKEN, headers: { "idempotency-key": randomUUID() }, body: { provider: "claude", prompt: "x" } });
    assert.equal(observerInvoke.status, 403);
    assert.equal(observerInvoke.body.code, "forbidden");
    assert.ok(!node.stderr().includes(OPERATOR_TOKEN) && !node.stdout().includes(OPERATOR_TOKEN));
  });

  it("gives every Idempotency-Key status, streams a run's events live, verifies and reconciles it", async () => {
    const missing = await invoke(undefined, { provider: "claude", prompt: "x" });
    assert.equal(missing.status, 400);
    assert.equal(missing.body.code, "idempotency-key-missing");
    const invalid = await invoke("not-a-uuid", { provider: "claude", prompt: "x" });
    assert.equal(invalid.status, 400);
    assert.equal(invalid.body.code, "idempotency-key-invalid");

    const key = randomUUID();
    const body = { provider: "claude", prompt: "review the diff" };
    const fresh = await invoke(key, body);
    assert.equal(fresh.status, 202);
    assert.equal(fresh.headers.get("cache-control"), "no-store");
    assert.deepEqual({ scope: fresh.body.scope, id: fresh.body.id, status: fresh.body.status }, { scope: "api:operator", id: key, status: "running" });
    await waitFor("the run to be recorded", async () => ((await stateOf(key)).status === "recorded" ? true : undefined));
    const replay = await invoke(key, body);
    assert.equal(replay.status, 200);
    assert.equal(replay.headers.get("idempotency-replayed"), "true");
    assert.equal(replay.headers.get("cache-control"), "no-store");
    assert.equal(replay.body.run_id, fresh.body.run_id);
    assert.equal((replay.body.result as { exit_code: number }).exit_code, 0);
    const conflict = await invoke(key, { ...body, prompt: "something else" });
    assert.equal(conflict.status, 422);
    assert.equal(conflict.body.code, "idempotency-conflict");

    // A run that hangs until its timeout: in-progress, live events, then unresolved.
    const hangKey = randomUUID();
    const hang = { provider: "claude", prompt: "#hang", timeout_s: 2 };
    const startsBefore = startCount();
    const running = await invoke(hangKey, hang);
    assert.equal(running.status, 202);
    const runId = running.body.run_id as string;
    const busy = await invoke(hangKey, hang);
    assert.equal(busy.status, 409);
    assert.equal(busy.body.code, "in-progress");

    const events = await fetch(`${node.url}/v1/runs/${runId}/events`, { headers: { authorization: `Bearer ${OBSERVER_TOKEN}` } });
    assert.equal(events.status, 200);
    assert.match(events.headers.get("content-type") ?? "", /^text\/event-stream/);
    const reader = events.body!.getReader();
    const decoder = new TextDecoder();
    let buffered = "";
    const messages: string[] = [];
    const nextMessage = async (): Promise<string | undefined> => {
      for (;;) {
        const at = buffered.indexOf("\n\n");
        if (at >= 0) {
          const message = buffered.slice(0, at);
          buffered = buffered.slice(at + 2);
          if (message.startsWith(":")) continue; // keep-alive comment
          return message;
        }
        const chunk = await reader.read();
        if (chunk.done) return undefined;
        buffered += decoder.decode(chunk.value, { stream: true });
      }
    };
    const first = await nextMessage();
    assert.ok(first !== undefined);
    messages.push(first);
    assert.match(first, /^id: 0\ndata: /);
    // Received while the run is still going: the stream is live, not a replay of a finished file.
    assert.equal((await stateOf(hangKey)).status, "in_progress");
    for (let m = await nextMessage(); m !== undefined; m = await nextMessage()) messages.push(m);
    const entries = messages
      .filter((m) => m.startsWith("id: "))
      .map((m) => JSON.parse(m.slice(m.indexOf("data: ") + 6)) as { entry: { seq: number; event: { type: string; reason?: string } } });
    assert.equal(entries[0]?.entry.event.type, "run.started");
    assert.deepEqual(entries.at(-1)?.entry.event, { type: "run.terminated", reason: "timeout" });
    assert.deepEqual(entries.map((e) => e.entry.seq), entries.map((_, i) => i));
    assert.equal(messages.at(-1), 'event: end\ndata: {"reason":"terminated"}');

    await waitFor("the run to read unresolved", async () => ((await stateOf(hangKey)).status === "unresolved" ? true : undefined));
    const unresolved = await invoke(hangKey, hang);
    assert.equal(unresolved.status, 409);
    assert.equal(unresolved.body.code, "unresolved");
    assert.equal(startCount(), startsBefore + 1, "the agent was started once");

    const verification = await call("GET", `/v1/runs/${runId}/verification`, { token: OBSERVER_TOKEN });
    assert.equal(verification.status, 200);
    assert.equal(verification.body.ok, true);
    assert.equal(verification.body.entries, entries.length);
    assert.equal(verification.body.requires_reconciliation, true);
    const journal = await call("GET", `/v1/runs/${runId}/journal`, { token: OBSERVER_TOKEN });
    assert.match(journal.headers.get("content-type") ?? "", /^application\/x-ndjson/);
    assert.equal(journal.text.split("\n").filter(Boolean).length, entries.length);

    const inspection = await call("GET", `/v1/invocations/api:operator/${hangKey}/inspection`);
    assert.equal(inspection.status, 200);
    const review = {
      snapshot_hash: inspection.body.snapshot_hash,
      outcome: "no_effects",
      rationale: "hung before any tool call; the process group was killed at the timeout",
      evidence: [{ reference: `journal ${runId}`, sha256: "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126" }],
      effects_stopped: true,
    };
    const reconciled = await call("POST", `/v1/invocations/api:operator/${hangKey}/reconciliation`, { body: review });
    assert.equal(reconciled.status, 201);
    assert.equal((await call("POST", `/v1/invocations/api:operator/${hangKey}/reconciliation`, { body: review })).status, 200);
    const closed = await invoke(hangKey, hang);
    assert.equal(closed.status, 409);
    assert.equal(closed.body.code, "reconciled");
    assert.equal(startCount(), startsBefore + 1, "never run again");
  });

  it("answers bad input with its own code, keeps serving, and changes nothing stored", async () => {
    const bundleDir = path.join(root, "bundle");
    for (const f of fullBundleFiles()) {
      fs.mkdirSync(path.dirname(path.join(bundleDir, f.path)), { recursive: true });
      fs.writeFileSync(path.join(bundleDir, f.path), f.content);
    }
    const bundle: CompiledBundle = await compileDirectory(bundleDir, { bundleId: "e2e", revision: "r1" });
    const begun = await call("POST", "/v1/stages", { body: bundle.manifest });
    assert.equal(begun.status, 201);
    const stageId = begun.body.stage_id as string;
    const missing = begun.body.missing as { digest: string; byte_len: number }[];

    const snapshot = async (): Promise<string> =>
      JSON.stringify([(await call("GET", "/v1/bundles")).text, (await call("GET", "/v1/invocations")).text, (await call("GET", `/v1/stages/${stageId}`)).text]);
    const before = await snapshot();
    const traversal = JSON.parse(JSON.stringify(bundle.manifest)) as { components: { relative_path: string }[] };
    traversal.components[0]!.relative_path = "../outside.md";
    const cases: [string, () => Promise<Reply>, number, string][] = [
      ["malformed JSON", () => call("POST", "/v1/stages", { raw: '{"bundle_id":', headers: { "content-type": "application/json" } }), 400, "json-malformed"],
      ["unknown field", () => invoke(randomUUID(), { provider: "claude", prompt: "x", owner: "me" }), 400, "invoke-request-unknown-field"],
      ["oversized body", () => invoke(randomUUID(), { provider: "claude", prompt: "x".repeat(3 * 1024 * 1024) }), 413, "body-too-large"],
      ["wrong Content-Type", () => call("POST", "/v1/stages", { raw: "bundle", headers: { "content-type": "text/plain" } }), 415, "unsupported-media-type"],
      ["bad digest in the path", () => call("PATCH", `/v1/stages/${stageId}/blobs/md5:abc`, { raw: "x", headers: { "content-type": "application/octet-stream", "upload-offset": "0" } }), 400, "digest-invalid"],
      ["path traversal in a manifest", () => call("POST", "/v1/stages", { body: traversal }), 400, "manifest-path-traversal"],
      [
        "a chunk for an unknown stage",
        () => call("PATCH", `/v1/stages/${"f".repeat(32)}/blobs/${missing[0]!.digest}`, { raw: "x", headers: { "content-type": "application/octet-stream", "upload-offset": "0" } }),
        404,
        "stage-not-found",
      ],
    ];
    for (const [name, send, status, code] of cases) {
      const res = await send();
      assert.equal(res.status, status, `${name}: ${res.text}`);
      assert.equal(res.body.code, code, name);
      assert.match(res.headers.get("content-type") ?? "", /^application\/problem\+json/, name);
      assert.equal((await call("GET", "/readyz")).status, 200, `still serving after ${name}`);
    }
    assert.equal(await snapshot(), before, "nothing stored changed");

    // The same node then takes a real upload: a chunk body streamed over the socket in pieces.
    for (const m of missing) {
      const file = bundle.files.find((f) => f.component.blob.digest === m.digest)!;
      const bytes = fs.readFileSync(file.absolutePath);
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < bytes.length; i += 7) controller.enqueue(bytes.subarray(i, i + 7));
          controller.close();
        },
      });
      const res = await fetch(`${node.url}/v1/stages/${stageId}/blobs/${m.digest}`, {
        method: "PATCH",
        headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, "content-type": "application/octet-stream", "upload-offset": "0" },
        body: stream,
        duplex: "half",
      } as RequestInit);
      assert.equal(res.status, 204);
      assert.equal(res.headers.get("upload-offset"), String(m.byte_len));
    }
    const commit = await call("POST", `/v1/stages/${stageId}/commit`);
    assert.equal(commit.status, 200);
    assert.equal((commit.body.receipt as { manifest_digest: string }).manifest_digest, bundle.manifest.manifest_digest);
    const metrics = await call("GET", "/metrics");
    const received = Number(/^warden_delivery_bytes_received_total (\d+)$/m.exec(metrics.text)?.[1]);
    assert.equal(received, missing.reduce((n, m) => n + m.byte_len, 0));
  });

  it("after kill -9 mid-run and a restart, the orphaned agents and all they started are killed, the runs read unresolved and are never started again", async () => {
    const key = randomUUID();
    const hang = { provider: "claude", prompt: "#hang #grandchild #clean-grandchild" };
    // This agent leaves as soon as its node is gone: only its child with a clean environment (no
    // tag) stays behind, and only the node's launch record can tell the next node about it.
    const leaverKey = randomUUID();
    const leaver = { provider: "claude", prompt: "#hang #clean-grandchild #orphan-exits" };
    const before = startCount();
    const childrenBefore = grandchildPids().length;
    const cleanBefore = grandchildPids("clean-grandchild").length;
    assert.equal((await invoke(key, hang)).status, 202);
    await waitFor("the agent and its children to start", () =>
      startCount() === before + 1 && grandchildPids().length === childrenBefore + 1 && grandchildPids("clean-grandchild").length === cleanBefore + 1 ? true : undefined,
    );
    assert.equal((await invoke(leaverKey, leaver)).status, 202);
    await waitFor("the leaving agent and its child to start", () =>
      startCount() === before + 2 && grandchildPids("clean-grandchild").length === cleanBefore + 2 ? true : undefined,
    );
    await node.kill();
    const [agentPid, leaverPid] = startedPids().slice(-2) as [number, number];
    const childPid = grandchildPids().at(-1)!;
    const [cleanChildPid, leaverChildPid] = grandchildPids("clean-grandchild").slice(-2) as [number, number];
    await waitFor("the leaving agent to exit once its node is gone", () => (!isAlive(leaverPid) ? true : undefined));
    // A pause, not a wait: it checks that nothing happens (the orphans stay alive), which has no moment to wait for.
    await new Promise((r) => setTimeout(r, 200));
    const orphans = [agentPid, childPid, cleanChildPid, leaverChildPid];
    assert.ok(orphans.every(isAlive), "a node killed with -9 cannot stop its agents: what they started is orphaned");
    node = await start();
    // The new node found them by the tag in their environment (its home, a node process that is
    // gone), by the session they share with a tagged agent, or by the dead node's launch record.
    await waitFor("the orphans to be gone", () => (!orphans.some(isAlive) ? true : undefined));
    assert.deepEqual(fs.readdirSync(path.join(home, "agents")), [], "the dead node's launch records are dropped");
    for (const k of [key, leaverKey]) {
      const state = await stateOf(k);
      assert.equal(state.status, "unresolved");
      assert.deepEqual(state.reasons, ["owner-gone"]);
    }
    const retry = await invoke(key, hang);
    assert.equal(retry.status, 409);
    assert.equal(retry.body.code, "unresolved");
    const listed = await call("GET", "/v1/invocations?status=unresolved");
    assert.ok((listed.body.items as { id: string }[]).some((i) => i.id === key));
    // A pause, not a wait: it checks that nothing happens (no agent started again), which has no moment to wait for.
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(startCount(), before + 2, "no agent was started again");
  });

  it("SIGTERM stops accepting, kills an agent still running after the grace period, and exits 0", async () => {
    const key = randomUUID();
    const before = startCount();
    assert.equal((await invoke(key, { provider: "claude", prompt: "#hang" })).status, 202);
    await waitFor("the agent to start", () => (startCount() === before + 1 ? true : undefined));
    const agentPid = startedPids().at(-1)!;
    const stopped = Date.now();
    assert.equal(await node.stop(), 0);
    assert.ok(Date.now() - stopped < 10_000);
    assert.ok(!fs.existsSync(path.join(home, "node.json")), "node.json removed on clean shutdown");
    await waitFor("the agent to be gone", () => (isAlive(agentPid) ? undefined : true));
    node = await start();
    const state = await stateOf(key);
    assert.equal(state.status, "unresolved");
    assert.equal(startCount(), before + 1);
  });

  it("SIGTERM during a chunk upload lets that chunk finish durably before the node exits", async () => {
    const dir = path.join(root, "slow-bundle");
    const big = Buffer.alloc(96 * 1024, 0x61);
    fs.mkdirSync(path.join(dir, "skills", "slow"), { recursive: true });
    fs.writeFileSync(path.join(dir, "skills", "slow", "SKILL.md"), "---\nname: slow\ndescription: A skill uploaded slowly.\n---\n");
    fs.writeFileSync(path.join(dir, "skills", "slow", "data.md"), big);
    const bundle = await compileDirectory(dir, { bundleId: "slow", revision: "r1" });
    const begun = await call("POST", "/v1/stages", { body: bundle.manifest });
    assert.equal(begun.status, 201);
    const target = (begun.body.missing as { digest: string; byte_len: number }[]).find((m) => m.byte_len === big.length)!;
    // node:http, so the test decides exactly when each byte leaves: headers and a first piece,
    // then SIGTERM while the request is in flight, then the rest.
    const url = new URL(`${node.url}/v1/stages/${begun.body.stage_id as string}/blobs/${target.digest}`);
    const reply = new Promise<{ status: number; offset: string | undefined }>((resolve, reject) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: "PATCH",
          agent: false,
          headers: {
            authorization: `Bearer ${OPERATOR_TOKEN}`,
            "content-type": "application/octet-stream",
            "upload-offset": "0",
            "content-length": big.length,
          },
        },
        (res) => {
          res.resume();
          res.on("end", () => resolve({ status: res.statusCode ?? 0, offset: res.headers["upload-offset"] as string | undefined }));
        },
      );
      req.on("error", reject);
      void (async () => {
        for (let sent = 0; sent < big.length; sent += 16 * 1024) {
          req.write(big.subarray(sent, sent + 16 * 1024));
          // Pacing, not waiting: a slow upload is the thing under test (the node stops mid-chunk).
          await new Promise((r) => setTimeout(r, sent === 0 ? 500 : 100));
          if (sent === 0) node.child.kill("SIGTERM");
        }
        req.end();
      })();
    });
    const res = await reply;
    assert.equal(res.status, 204);
    assert.equal(res.offset, String(big.length));
    // The SIGTERM above stops it: a second one from stop() would end it at once, with 143.
    assert.equal(await node.exited(), 0);
    node = await start();
    const status = await call("GET", `/v1/stages/${begun.body.stage_id as string}`);
    assert.ok(!(status.body.missing as { digest: string }[]).some((m) => m.digest === target.digest), "the chunk survived the shutdown");
  });
});
