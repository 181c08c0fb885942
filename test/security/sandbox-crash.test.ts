/**
 * kill -9 of the node during a confined run: bubblewrap dies with its parent, and the agent's pid
 * namespace with it, so no process of the run survives (not even one it detached with setsid);
 * the restarted node reads the run unresolved. Asserted from the outside: the process table and
 * the claim.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { randomUUID } from "node:crypto";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { openWarden } from "../../src/warden/facade.js";
import { LONG_TEST_MS, waitFor } from "../support/wait.js";

const CHILD = fileURLToPath(new URL("./children/confined-node.ts", import.meta.url));

function withMarker(marker: string): number[] {
  const pids: number[] = [];
  for (const pid of fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
      const state = /^State:\s+(\S)/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
      if (cmdline.includes(marker) && state !== "Z") pids.push(Number(pid));
    } catch {
      // gone
    }
  }
  return pids;
}

test("kill -9 of the node mid-run: no process of the confined run survives, the run reads unresolved", { timeout: LONG_TEST_MS }, async (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "warden-sandbox-crash-"));
  const home = path.join(root, "home");
  const ws = path.join(root, "ws");
  fs.mkdirSync(ws);
  const marker = `confined-daemon-${randomUUID()}`;
  t.after(() => {
    for (const pid of withMarker(marker)) process.kill(pid, "SIGKILL");
    fs.rmSync(root, { recursive: true, force: true });
  });
  const id = randomUUID();
  const prompt = JSON.stringify({ daemon: marker, hang: true });
  const node = spawn(process.execPath, ["--import", "tsx", CHILD, home, ws, id, prompt], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  node.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<string | null>((resolve) => node.on("close", (_code, signal) => resolve(signal)));
  await waitFor("the confined agent to write <workspace>/started", () => {
    // A node that could not start the run will never: say why instead of waiting out the budget.
    if (node.exitCode !== null) throw new Error(`the node exited ${node.exitCode} before the agent started: ${stderr}`);
    return fs.existsSync(path.join(ws, "started")) || undefined;
  });
  await waitFor("the agent's setsid daemon to be running", () => (withMarker(marker).length > 0 ? true : undefined));
  node.kill("SIGKILL");
  assert.equal(await exited, "SIGKILL", stderr);
  await waitFor("every process of the run to be gone after the node's kill -9", () => (withMarker(marker).length === 0 ? true : undefined), 60_000);
  const hostilePids = fs.readFileSync(path.join(ws, "started"), "utf8");
  assert.ok(hostilePids.length > 0);

  const warden = await openWarden({ home, workspaces: { main: ws } });
  try {
    const outcome = await warden.lookup("test", id);
    assert.equal(outcome?.status, "unresolved", JSON.stringify(outcome));
  } finally {
    await warden.close();
  }
  assert.deepEqual(withMarker(marker), []);
});
