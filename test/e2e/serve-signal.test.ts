/**
 * A stop signal that arrives while `warden serve` is starting is a graceful stop: once the node is
 * up it shuts down as on any SIGTERM (node.json removed, stores closed, exit 0). Before, a signal
 * that came after node.json was published but before the handler was installed killed the node
 * outright, leaving node.json and an unchecked-pointed database behind.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import { cleanEnv, cliEntry } from "../support/node.js";
import { tempDir } from "../support/temp.js";

test("SIGTERM the moment node.json appears: the node still shuts down gracefully", async (t) => {
  const root = tempDir("serve-signal");
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  for (let round = 0; round < 3; round++) {
    const home = join(root, `home-${round}`);
    fs.mkdirSync(home, { mode: 0o700 });
    const child = spawn(process.execPath, ["--import", "tsx", cliEntry, "serve", "--home", home, "--listen", "127.0.0.1:0", "--log-level", "warn"], {
      env: cleanEnv({ WARDEN_TOKEN: "serve-signal-token-0123456789" }),
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((done) => child.once("exit", (code, signal) => done([code, signal])));
    // Signalled as soon as the file is linked in, while its publication is still being made durable.
    const watcher = fs.watch(home, (_event, name) => {
      if (name === "node.json") {
        watcher.close();
        child.kill("SIGTERM");
      }
    });
    const [code, signal] = await exited;
    watcher.close();
    assert.deepEqual([code, signal], [0, null], `round ${round}: ${stderr}`);
    assert.equal(fs.existsSync(join(home, "node.json")), false, `round ${round}: node.json removed`);
  }
});
