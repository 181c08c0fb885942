/**
 * Two real `warden serve --postgres` processes race for the last slot of the queue's fleet-wide
 * limits (issue 32), many times, and the agents' own log (test/fixtures/agents/queue-agent.sh,
 * checked by test/support/queue-log.ts, outside both nodes) says whether a limit ever overran.
 *
 * The three-node fleet test never overran its limits even with the limit locks removed: its
 * slots were few next to its limits. Here each node has far more slots than any limit, the
 * limits are small (workspace 1, provider 4, codex's rate 3 a minute) and always full, so each
 * run's end is a race between the two nodes for the slot it freed (the node that ran it dequeues
 * at once, the other on its 250 ms tick): a hundred races and more. Only the limit's lock decides
 * which node wins.
 *
 * The first claude agents hold (the fixture's `gate=`) until claude's limit is running at once,
 * then each sleeps: on a loaded machine a node may take longer to start an agent than an agent
 * sleeps, and the limit would then never be full. After that, every run's end is raced for as
 * before.
 *
 * WARDEN_QUEUE_RACE_RUNS scales the claude runs (default 120), WARDEN_QUEUE_RACE_SLEEP_MS each
 * agent's sleep (default 150 ms).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { fixtureAgents, httpCall, startNode, type NodeProcess } from "../support/node.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";
import { analyzeQueueLog, readQueueLog, type JobMeta } from "../support/queue-log.js";
import { tempDir } from "../support/temp.js";
import { LONG_TEST_MS, waitFor } from "../support/wait.js";

const OPERATOR = "queue-race-operator-token-0123456789abcdef";
const RUNS = Number(process.env.WARDEN_QUEUE_RACE_RUNS ?? 120);
const SLEEP_MS = Number(process.env.WARDEN_QUEUE_RACE_SLEEP_MS ?? 150);
const CODEX_RUNS = 8;
/** Slots far above every limit: the limits alone bound what runs. */
const SLOTS = 8;
const LIMITS = { workspace: 1, provider: 4 };
const CODEX_RATE = 3;
const NODES = ["a", "b"] as const;
const WORKSPACES = ["w1", "w2", "w3", "w4", "w5", "w6"] as const;
const RATED = ["r1", "r2", "r3", "r4"] as const;

describe("two warden serve --postgres processes racing for a limit's last slot", () => {
  let pg: TestPostgres;
  let root: string;
  let log: string;
  const nodes: NodeProcess[] = [];

  before(async () => {
    pg = await startTestPostgres();
    const url = await pg.createDatabase("queue_limit_race");
    root = tempDir("queue-limit-race");
    log = path.join(root, "agents.log");
    const agent = path.join(fixtureAgents, "queue-agent.sh");
    const started = await Promise.all(
      NODES.map((name) => {
        const home = path.join(root, name);
        fs.mkdirSync(home, { recursive: true, mode: 0o700 });
        const workspaces = [...WORKSPACES, ...RATED].flatMap((ws) => {
          const dir = path.join(root, `${name}-${ws}`);
          fs.mkdirSync(dir, { recursive: true });
          return ["--workspace", `${ws}=${dir}`];
        });
        return startNode({
          home,
          args: ["--postgres", url, "--provider", `claude=${agent}`, "--provider", `codex=${agent}`, ...workspaces, "--log-level", "warn"],
          env: { WARDEN_TOKEN: OPERATOR, WARDEN_FIXTURE_QUEUE_LOG: log, WARDEN_FIXTURE_NODE: name },
          config: { defaultWorkspace: "w1", queue: { slots: SLOTS, limits: LIMITS, rates: { codex: CODEX_RATE }, labels: { node: name } } },
        });
      }),
    );
    nodes.push(...started);
  });

  after(async () => {
    await Promise.all(nodes.map((n) => n.kill()));
    await pg?.stop();
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  it("no workspace, provider or provider's rate ever has more agents than its limit, as the agents logged them", { timeout: LONG_TEST_MS }, async (t) => {
    const meta = new Map<string, JobMeta>();
    const job = (provider: "claude" | "codex", workspace: string, note: string, node?: (typeof NODES)[number]): { key: string; body: Record<string, unknown> } => {
      const key = randomUUID();
      meta.set(key, { principal: "operator", workspace });
      return { key, body: { provider, workspace, prompt: `job=${key} sleep=${SLEEP_MS} ${note}`, ...(node === undefined ? {} : { labels: { node } }) } };
    };
    // Sent to both nodes at the same moment: each submission kicks the node it reaches, so both
    // dequeue at once, each with slots to spare, and only the limits' locks stand between them.
    const submitAll = (jobs: readonly { key: string; body: Record<string, unknown> }[]): Promise<unknown> =>
      Promise.all(
        jobs.map(async ({ key, body }, i) => {
          const reply = await httpCall(nodes[i % nodes.length]!.url, OPERATOR, "POST", "/v1/invocations", { headers: { "idempotency-key": key, prefer: "respond-async" }, body });
          assert.equal(reply.status, 202, reply.text);
        }),
      );
    const ends = (provider: string): number => readQueueLog(log).filter((l) => l.ev === "end" && l.provider === provider).length;
    const gate = path.join(root, "claude-limit-full");

    // Codex's first (its rate is raced for once: a minute is longer than this test), then the
    // claude runs, all at once: each run's end frees a workspace's and claude's slot, and both
    // nodes (one kicked by the end, the other on its own tick) go for it.
    await submitAll([
      ...Array.from({ length: CODEX_RUNS }, (_, i) => job("codex", RATED[i % RATED.length]!, "rated work")),
      ...Array.from({ length: RUNS }, (_, i) => job("claude", WORKSPACES[i % WORKSPACES.length]!, `limited work gate=${gate}`)),
      // The node whose run ends leases its slot at once, the other on its tick: one node can win
      // every race. One last run for each node (its label) makes both run agents, whoever wins.
      ...NODES.map((node, i) => job("claude", WORKSPACES[i]!, `pinned work gate=${gate}`, node)),
    ]);
    await waitFor(`claude's limit of ${LIMITS.provider} agents running at once (they hold until then)`, () =>
      readQueueLog(log).filter((l) => l.ev === "start" && l.provider === "claude").length >= LIMITS.provider || undefined,
    );
    fs.writeFileSync(gate, "");
    await waitFor(`${RUNS + NODES.length} claude agents to log their end`, () => ends("claude") >= RUNS + NODES.length || undefined, LONG_TEST_MS, 100);
    const lines = await waitFor(`${CODEX_RATE} codex agents to log their end`, () => (ends("codex") >= CODEX_RATE ? readQueueLog(log) : undefined), LONG_TEST_MS, 100);
    const report = analyzeQueueLog(lines, meta);
    assert.deepEqual(report.duplicates, [], "an invocation ran more than once");
    const max = report.maxConcurrency;
    const seen = JSON.stringify({ node: Object.fromEntries(max.byNode), workspace: Object.fromEntries(max.byWorkspace), provider: Object.fromEntries(max.byProvider) });
    t.diagnostic(`most agents at once: ${seen}`);
    const overruns: string[] = [];
    for (const [w, m] of max.byWorkspace) if (m > LIMITS.workspace) overruns.push(`workspace ${w} had ${m} agents at once, limit ${LIMITS.workspace}`);
    for (const [p, m] of max.byProvider) if (m > LIMITS.provider) overruns.push(`provider ${p} had ${m} agents at once, limit ${LIMITS.provider}`);
    // The rate: the first codex starts lie within a few seconds, far inside the minute, so at
    // most CODEX_RATE of them may have started within 50 s of the first (the slack covers a
    // lease made late in the node's minute whose agent started sooner than the first one's).
    const codex = report.agents.filter((a) => a.provider === "codex");
    const first = codex[0]!.startWall;
    const inWindow = codex.filter((a) => a.startWall < first + 50_000).length;
    if (inWindow > CODEX_RATE) overruns.push(`${inWindow} codex agents started within 50 s of the first, rate ${CODEX_RATE} a minute`);
    assert.deepEqual(overruns, [], `a limit overran: ${seen}`);
    // The limits were reached (each was raced for), by both nodes.
    assert.equal(max.byProvider.get("claude"), LIMITS.provider, `claude reached its limit: ${seen}`);
    const ranOn = new Set(report.agents.map((a) => a.node));
    assert.deepEqual([...ranOn].sort(), [...NODES], "both nodes ran agents");
    if (Date.now() < first + 50_000) {
      // Still inside codex's minute: the rest of its runs are waiting.
      const queued = await httpCall(nodes[0]!.url, OPERATOR, "GET", "/v1/invocations?status=queued");
      assert.equal(queued.status, 200, queued.text);
      assert.equal((queued.body.items as unknown[]).length, CODEX_RUNS - inWindow, queued.text);
    }
  });
});
