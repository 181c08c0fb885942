/**
 * The owner lock of a node whose host vanishes (power lost, network cut) must not outlive it by
 * hours: no FIN reaches the server then, and only the server's TCP keepalive ends the session that
 * holds the lock. This reads the kernel's own keepalive timer of the server's end of the lock's
 * connection (Linux /proc/net/tcp), over a real loopback TCP connection: short, not the system's
 * default of two hours.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import pg from "pg";
import { openPostgresBackend } from "../../src/backends/postgres/index.js";
import { useTestPostgres } from "../support/postgres.js";

/** `/proc/net/tcp` timer codes (`tr`): 2 is the keepalive timer. */
const KEEPALIVE_TIMER = 2;
/** `tm->when` counts clock ticks (USER_HZ). */
const TICKS_PER_SECOND = 100;

/** The timer of the established IPv4 socket from `localPort` to `remotePort`, as the kernel reports it. */
function socketTimer(localPort: number, remotePort: number): { timer: number; seconds: number } | undefined {
  for (const line of readFileSync("/proc/net/tcp", "utf8").split("\n").slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < 6) continue;
    const local = Number.parseInt(fields[1]!.split(":")[1]!, 16);
    const remote = Number.parseInt(fields[2]!.split(":")[1]!, 16);
    if (local !== localPort || remote !== remotePort || fields[3] !== "01") continue;
    const [timer, when] = fields[5]!.split(":");
    return { timer: Number.parseInt(timer!, 16), seconds: Number.parseInt(when!, 16) / TICKS_PER_SECOND };
  }
  return undefined;
}

/**
 * The timer of an idle connection: between round trips its keepalive timer runs (while a reply
 * waits for its ACK, the retransmit timer shows instead), so the kernel is asked a few times.
 */
async function idleTimer(localPort: number, remotePort: number): Promise<{ timer: number; seconds: number } | undefined> {
  let timer = socketTimer(localPort, remotePort);
  for (let i = 0; i < 150 && timer?.timer !== KEEPALIVE_TIMER; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    timer = socketTimer(localPort, remotePort);
  }
  return timer;
}

describe("postgres owner lock over TCP", () => {
  const server = useTestPostgres({ tcp: true });

  test("the server notices a vanished node within seconds: its end of the lock's connection keeps alive every 5 s, not every 2 hours", async (t) => {
    const url = server.overTcp(await server.createDatabase("keepalive"));
    const node = await openPostgresBackend({ url });
    t.after(() => node.close());
    const serverPort = Number(new URL(url).port);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    t.after(() => admin.end());
    const { rows } = await admin.query<{ client_port: number }>(
      "SELECT client_port FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()",
      [`warden-owner ${node.owner.id}`],
    );
    assert.equal(rows.length, 1, "the owner lock's session, over TCP");
    const timer = await idleTimer(serverPort, rows[0]!.client_port);
    assert.ok(timer !== undefined, "the server's end of the connection is in /proc/net/tcp");
    assert.equal(timer.timer, KEEPALIVE_TIMER, "a keepalive timer runs on it");
    assert.ok(timer.seconds <= 6, `the next keepalive probe is due in ${timer.seconds} s (the kernel's default would be 7200 s)`);
    // The pool's sessions too (a begin's or a gc's store-wide lock lives in one of them).
    await node.claims.get({ scope: "s", id: "00000000-0000-4000-8000-000000000000" });
    const pooled = await admin.query<{ client_port: number }>(
      "SELECT client_port FROM pg_stat_activity WHERE application_name = 'warden' AND datname = current_database()",
    );
    assert.ok(pooled.rows.length >= 1, "the pool has a session");
    for (const { client_port } of pooled.rows) {
      const pooledTimer = await idleTimer(serverPort, client_port);
      assert.ok(pooledTimer !== undefined && pooledTimer.seconds <= 6, `a pooled session keeps alive every ${pooledTimer?.seconds} s`);
    }
  });
});
