/**
 * Queued invocations on a fleet (issue 32): three real `warden serve --postgres` processes on one
 * throwaway PostgreSQL take submitted invocations (`Prefer: respond-async`) from the shared queue.
 * What ran is read from outside the nodes: the fixture agent (test/fixtures/agents/queue-agent.sh,
 * the shell twin of queue-agent.mjs: a thousand Node agents would cost the machine minutes of CPU)
 * logs its own start and end to one file, and test/support/queue-log.ts checks the log.
 *
 * - 1,000 queued invocations from two principals (900 and 100, the small one submitting after the
 *   big one's burst): each runs exactly once; no node, workspace or provider ever has more agents
 *   at once than its limit; every node takes a share; and the small principal is served through
 *   the big one's backlog, not after it.
 *
 * The first agents hold (the fixture's `gate=`) until more run at once than one node has slots:
 * on a loaded machine a node may take longer to start an agent than an agent sleeps, and the
 * fleet would then never run more at once than one node could.
 *
 * WARDEN_QUEUE_FLEET_RUNS scales the number of invocations (default 1,000, split 9:1), and
 * WARDEN_QUEUE_FLEET_SLEEP_MS each agent's sleep (default 100 ms).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { createHash, randomUUID } from "node:crypto";
import { fixtureAgents, httpCall, startNode, type HttpReply, type NodeProcess } from "../support/node.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { analyzeQueueLog, appendMark, interleaving, readQueueLog, type JobMeta } from "../support/queue-log.js";
import { killIfStillRecorded } from "../support/processes.js";
import { tempDir } from "../support/temp.js";
import { LONG_TEST_MS, waitFor } from "../support/wait.js";

const OPERATOR = "queue-fleet-operator-token-0123456789abcdef";
/** Two more callers: their scopes `api:big` and `api:small` are the principals fairness is across. */
const CALLERS = { big: "queue-fleet-big-token-0123456789abcdef0123", small: "queue-fleet-small-token-0123456789abcdef01" } as const;
const RUNS = Number(process.env.WARDEN_QUEUE_FLEET_RUNS ?? 1000);
const SLEEP_MS = Number(process.env.WARDEN_QUEUE_FLEET_SLEEP_MS ?? 100);
/** Each binds: 3 nodes × 4 slots = 12 > 2 workspaces × 5; claude's share of the runs wants more than 6. */
const SLOTS = 4;
const LIMITS = { workspace: 5, provider: 6 };
const NODES = ["a", "b", "c"] as const;

const sha256 = (s: string): string => createHash("sha256").update(s).digest("hex");

describe("queued invocations on a fleet of three warden serve --postgres processes", () => {
  let pg: TestPostgres;
  let url: string;
  let root: string;
  let log: string;
  const nodes = new Map<string, NodeProcess>();

  const start = (name: string): Promise<NodeProcess> => {
    const home = path.join(root, name);
    fs.mkdirSync(home, { recursive: true, mode: 0o700 });
    fs.writeFileSync(
      path.join(home, "tokens.json"),
      JSON.stringify({ tokens: Object.entries(CALLERS).map(([caller, token]) => ({ name: caller, role: "operator", sha256: sha256(token) })) }),
      { mode: 0o600 },
    );
    const workspaces = ["main", "other"].flatMap((ws) => {
      const dir = path.join(root, `${name}-${ws}`);
      fs.mkdirSync(dir, { recursive: true });
      return ["--workspace", `${ws}=${dir}`];
    });
    const agent = path.join(fixtureAgents, "queue-agent.sh");
    return startNode({
      home,
      args: ["--postgres", url, "--provider", `claude=${agent}`, "--provider", `codex=${agent}`, ...workspaces, "--log-level", "warn"],
      env: { WARDEN_TOKEN: OPERATOR, WARDEN_FIXTURE_QUEUE_LOG: log, WARDEN_FIXTURE_NODE: name },
      config: { defaultWorkspace: "main", queue: { slots: SLOTS, limits: LIMITS } },
    });
  };
  const submit = (at: NodeProcess, token: string, key: string, body: unknown): Promise<HttpReply> =>
    httpCall(at.url, token, "POST", "/v1/invocations", { headers: { "idempotency-key": key, prefer: "respond-async" }, body });

  before(async () => {
    pg = await startTestPostgres();
    url = await pg.createDatabase("queue_fleet");
    root = tempDir("queue-fleet");
    log = path.join(root, "agents.log");
    for (const [name, node] of await Promise.all(NODES.map(async (n) => [n, await start(n)] as const))) nodes.set(name, node);
  });

  after(async () => {
    await Promise.all([...nodes.values()].map((n) => n.kill()));
    // Agents still running (no end logged): the long ones of a killed node.
    for (const agent of analyzeQueueLog(readQueueLog(log ?? "")).agents.filter((a) => a.end === undefined)) {
      killIfStillRecorded(agent);
    }
    await pg?.stop();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  it(`${RUNS} queued invocations from two principals: each runs once, within every limit, on every node, the small principal served through the big one's backlog`, { timeout: LONG_TEST_MS }, async (t) => {
    const smallCount = Math.round(RUNS / 10);
    const gate = path.join(root, "fleet-busier-than-a-node");
    const gateOpened = waitFor(`more than ${SLOTS} agents running at once across the fleet (they hold until then)`, () =>
      readQueueLog(log).filter((l) => l.ev === "start").length > SLOTS || undefined,
    ).then(() => fs.writeFileSync(gate, ""));
    gateOpened.catch(() => undefined); // awaited below, after the submissions
    const meta = new Map<string, JobMeta>();
    const job = (principal: "big" | "small", i: number): { key: string; body: Record<string, unknown> } => {
      const key = randomUUID();
      const workspace = i % 2 === 0 ? "main" : "other";
      // Seven in ten are claude's: more than its limit of 6 wants to run at once.
      const provider = i % 10 < 7 ? "claude" : "codex";
      meta.set(key, { principal: `api:${principal}`, workspace });
      return { key, body: { provider, workspace, prompt: `job=${key} sleep=${SLEEP_MS} gate=${gate} queued work` } };
    };
    const node = (i: number): NodeProcess => nodes.get(NODES[i % NODES.length]!)!;
    const burst = async (principal: "big" | "small", count: number): Promise<void> => {
      const jobs = Array.from({ length: count }, (_, i) => job(principal, i));
      let next = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < jobs.length) {
            const i = next++;
            const { key, body } = jobs[i]!;
            const reply = await submit(node(i), CALLERS[principal], key, body);
            assert.equal(reply.status, 202, reply.text);
            assert.equal(reply.body.status, "queued", reply.text);
          }
        }),
      );
    };

    await burst("big", RUNS - smallCount);
    // In the log's own order: what started after this line started after the small principal began submitting.
    appendMark(log, "small-submits");
    const submitting = Date.now();
    await burst("small", smallCount);
    const submitMs = Date.now() - submitting;
    await gateOpened;

    const lines = await waitFor(
      `all ${RUNS} agents to log their end`,
      () => {
        const read = readQueueLog(log);
        return read.filter((l) => l.ev === "end").length >= RUNS ? read : undefined;
      },
      LONG_TEST_MS,
      200,
    );
    const report = analyzeQueueLog(lines, meta);
    assert.equal(report.unnamed, 0);
    assert.deepEqual(report.duplicates, [], "an invocation ran more than once");
    assert.equal(report.startsByJob.size, RUNS, "every invocation ran");
    for (const key of report.startsByJob.keys()) assert.ok(meta.has(key), `an agent ran for a job nobody submitted: ${key}`);
    assert.ok(report.agents.every((a) => a.code === 0), "every agent exited 0");

    const max = report.maxConcurrency;
    const seen = JSON.stringify({ overall: max.overall, node: Object.fromEntries(max.byNode), workspace: Object.fromEntries(max.byWorkspace), provider: Object.fromEntries(max.byProvider) });
    for (const [n, m] of max.byNode) assert.ok(m <= SLOTS, `node ${n} ran ${m} agents at once with ${SLOTS} slots: ${seen}`);
    for (const [w, m] of max.byWorkspace) assert.ok(m <= LIMITS.workspace, `workspace ${w} had ${m} agents at once, limit ${LIMITS.workspace}: ${seen}`);
    for (const [p, m] of max.byProvider) assert.ok(m <= LIMITS.provider, `provider ${p} had ${m} agents at once, limit ${LIMITS.provider}: ${seen}`);
    assert.ok(max.overall > SLOTS, `more agents ran at once across the fleet than one node has slots: ${seen}`);
    // Submissions went to every node alike, but a node pulls only while it has room: each takes a share.
    const perNode = new Map<string, number>();
    for (const a of report.agents) perNode.set(a.node, (perNode.get(a.node) ?? 0) + 1);
    for (const name of NODES) assert.ok((perNode.get(name) ?? 0) >= RUNS / 10, `node ${name} ran ${perNode.get(name) ?? 0} of ${RUNS}: ${JSON.stringify(Object.fromEntries(perNode))}`);

    // Fairness. When the small principal's runs arrived, the big one's backlog was still queued.
    // A first-come queue would run that whole backlog first; fewest-running-first takes the small
    // principal's whenever it has fewer going, so each of its runs waits behind about one of the
    // big principal's, plus what was in flight on the fleet (at most its slots).
    const starts = report.agents;
    const smallFrom = report.marks.get("small-submits")!;
    const principalOf = (j: string): string => meta.get(j)!.principal;
    const bigBefore = starts.filter((a) => a.start < smallFrom && principalOf(a.job) === "api:big").length;
    const backlog = RUNS - smallCount - bigBefore;
    assert.ok(backlog >= 3 * smallCount, `a backlog of the big principal's runs was queued when the small one submitted (${backlog} of ${RUNS - smallCount})`);
    const smallStarts = starts.filter((a) => principalOf(a.job) === "api:small");
    const smallLast = smallStarts.at(-1)!.start;
    const bigBetween = starts.filter((a) => a.start > smallFrom && a.start < smallLast && principalOf(a.job) === "api:big").length;
    const fleetSlots = SLOTS * NODES.length;
    const order = interleaving(report.principalOrder.slice(RUNS - smallCount - backlog), "api:small");
    const detail = `backlog ${backlog}; ${bigBetween} big starts from the small principal's first submission to its last start; small's last start at ${(order.lastAt * 100).toFixed(0)}% of the starts after it submitted, longest run of big starts between two of small's ${order.longestGap}; submitted in ${submitMs} ms`;
    t.diagnostic(`concurrency ${seen}; runs per node ${JSON.stringify(Object.fromEntries(perNode))}; ${detail}`);
    assert.ok(bigBetween <= smallCount + 2 * fleetSlots, `the small principal waited behind the big one's backlog: ${detail}`);
    assert.ok(order.longestGap <= fleetSlots + 2 * NODES.length, `a long run of the big principal's starts between two of the small one's: ${detail}`);

    // Every invocation reads recorded, on a node other than the one it was submitted to too.
    const other = nodes.get("b")!;
    const queued = await httpCall(other.url, OPERATOR, "GET", "/v1/invocations?status=queued");
    assert.equal(queued.status, 200, queued.text);
    assert.deepEqual(queued.body.items, [], "nothing is left queued");
    let checked = 0;
    for (const [key, m] of meta) {
      if (checked++ % 25 !== 0) continue;
      const state = await httpCall(other.url, OPERATOR, "GET", `/v1/invocations/${m.principal}/${key}`);
      assert.equal(state.body.status, "recorded", `${m.principal}/${key}: ${state.text}`);
    }
  });
});
