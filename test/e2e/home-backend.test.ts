/**
 * One node process per home, and a home remembers which backend it served (G1 across restarts): a fleet node restarted
 * without --postgres must not start on a fresh embedded store and run again ids the fleet already
 * ran, and an embedded home started with --postgres must not hide its own claims. Both are refused
 * before anything is opened, naming the home, and nothing in it changes.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CLAIMS_DATABASE } from "../../src/backends/embedded/index.js";
import { isWardenError } from "../../src/core/errors.js";
import { openWarden, type WardenOptions } from "../../src/warden/facade.js";
import { HOME_BACKEND_FILE } from "../../src/warden/home-backend.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";

describe("a node's home and its backend", () => {
  let server: TestPostgres;
  let url: string;
  let root: string;
  before(async () => {
    server = await startTestPostgres();
    url = await server.createDatabase("home_backend");
    root = mkdtempSync(join(tmpdir(), "warden-home-backend-"));
  });
  after(async () => {
    rmSync(root, { recursive: true, force: true });
    await server?.stop();
  });

  async function ranOnce(options: WardenOptions): Promise<string> {
    const warden = await openWarden(options);
    try {
      const id = randomUUID();
      const outcome = await warden.invocations.run("api:ops", id, { task: 1 }, "agent", () => ({ ok: true }));
      assert.equal(outcome.status, "recorded");
      return id;
    } finally {
      await warden.close();
    }
  }

  async function refused(options: WardenOptions, recorded: string): Promise<void> {
    const before = readdirSync(options.home).sort();
    await assert.rejects(openWarden(options), (e: unknown) => {
      assert.ok(isWardenError(e) && e.code === "home-backend-mismatch", String(e));
      assert.match(e.message, new RegExp(`${options.home}.* serves the ${recorded} backend`));
      return true;
    });
    assert.deepEqual(readdirSync(options.home).sort(), before, "nothing in the home changed");
  }

  test("a fleet node's home refuses to start without --postgres, and an embedded home refuses --postgres", async () => {
    const fleetHome = join(root, "fleet");
    await ranOnce({ home: fleetHome, postgres: { url } });
    await refused({ home: fleetHome }, "postgres");
    assert.equal(existsSync(join(fleetHome, CLAIMS_DATABASE)), false, "no embedded store was made beside the fleet's");
    // Started as before, it serves as before.
    await ranOnce({ home: fleetHome, postgres: { url } });

    const embeddedHome = join(root, "embedded");
    await ranOnce({ home: embeddedHome });
    await refused({ home: embeddedHome, postgres: { url } }, "embedded");
    await ranOnce({ home: embeddedHome });
  });

  test("a first start that fails to open its backend records nothing: the home stays free for either backend", async () => {
    const home = join(root, "failed-first");
    const missing = new URL(url);
    missing.pathname = "/warden_no_such_database";
    await assert.rejects(openWarden({ home, postgres: { url: missing.href } }), (e: unknown) => isWardenError(e) && e.code !== "home-backend-mismatch");
    assert.equal(existsSync(join(home, HOME_BACKEND_FILE)), false, "no backend recorded for a start that never opened one");
    await ranOnce({ home });
    await refused({ home, postgres: { url } }, "embedded");
  });

  test("a home from before the record is known by its embedded claims; a record it cannot read is refused", async () => {
    const old = join(root, "old");
    await ranOnce({ home: old });
    rmSync(join(old, HOME_BACKEND_FILE));
    await refused({ home: old, postgres: { url } }, "embedded");
    await ranOnce({ home: old });

    writeFileSync(join(old, HOME_BACKEND_FILE), "sqlite\n", { mode: 0o600 });
    await assert.rejects(openWarden({ home: old }), (e: unknown) => isWardenError(e) && e.code === "home-backend-unknown");
  });

  test("one process at a time: a second node on a home in use is refused, for as long as the first serves", async () => {
    for (const [name, options] of [
      ["in-use-embedded", {}],
      ["in-use-fleet", { postgres: { url } }],
    ] as const) {
      const home = join(root, name);
      const first = await openWarden({ home, ...options });
      try {
        await assert.rejects(openWarden({ home, ...options }), (e: unknown) => isWardenError(e) && e.code === "home-in-use" && e.message.includes(home));
      } finally {
        await first.close();
      }
      await ranOnce({ home, ...options });
    }
  });
});
