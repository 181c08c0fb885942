/**
 * Fail closed: a node that cannot confine (here: bubblewrap configured at a path where there is
 * none, as on a machine without the package) refuses every run before its claim, with a code whose
 * message says what to install, and writes nothing: the id stays free, no journal, no run
 * directory, the agent never starts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { openWarden } from "../../src/warden/facade.js";

const HOSTILE = fileURLToPath(new URL("../fixtures/agents/hostile.mjs", import.meta.url));

test("without bubblewrap, confined runs are refused before the claim and nothing is written", async (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "warden-sandbox-none-"));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const home = path.join(root, "home");
  const ws = path.join(root, "ws");
  fs.mkdirSync(ws);
  const warden = await openWarden({
    home,
    workspaces: { main: ws },
    providers: { kimi: { command: HOSTILE, promptArgs: ["--", "{prompt}"] } },
    sandbox: { bwrap: path.join(root, "no-such-bwrap") },
  });
  try {
    const id = randomUUID();
    const journalsBefore = fs.readdirSync(path.join(home, "journals"), { recursive: true }).length;
    await assert.rejects(
      warden.invoke("test", id, { provider: "kimi", prompt: JSON.stringify({ hang: false, write: [path.join(ws, "ran")] }) }),
      (e: { code?: string; status?: number; message?: string }) =>
        e.code === "sandbox-unavailable" && e.status === 503 && /apt-get install bubblewrap/.test(e.message ?? ""),
    );
    assert.equal(await warden.lookup("test", id), undefined, "the id was claimed");
    assert.equal(fs.readdirSync(path.join(home, "journals"), { recursive: true }).length, journalsBefore, "a journal was written");
    assert.deepEqual(fs.readdirSync(path.join(home, "runs")), []);
    assert.equal(fs.existsSync(path.join(ws, "ran")), false, "the agent ran");
  } finally {
    await warden.close();
  }
});
