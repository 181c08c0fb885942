/**
 * kill -9 of the node between leaves and their checkpoint loses no leaf: the leaves are durable
 * when appended, and the next start signs a checkpoint that covers them.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { parseCheckpointText } from "../../src/tlog/checkpoint.js";
import { parseNote } from "../../src/tlog/note.js";
import { openWarden } from "../../src/warden/facade.js";

import { waitFor } from "../support/wait.js";
import { tempDir } from "../support/temp.js";
import { bundledScript } from "../support/bundle.js";

const CHILD = fileURLToPath(new URL("../fixtures/tlog/append-then-hang.ts", import.meta.url));

describe("transparency log and kill -9", () => {
  it("leaves appended before a kill -9 are in the checkpoint the next start signs", async () => {
    const root = tempDir("tlog-crash");
    const home = path.join(root, "home");
    try {
      // Bundled for plain node: through tsx the child spent about 2 s of CPU loading.
      const child = spawn(process.execPath, [await bundledScript(CHILD), home], { stdio: ["ignore", "pipe", "inherit"] });
      let out = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      const line = await waitFor("the child to print `appended`", () => /appended (\d+) checkpoint (\d+)/.exec(out) ?? undefined, 120_000);
      const [size, checkpointed] = [Number(line[1]), Number(line[2])];
      assert.equal(size, 301, "300 statements and the node's key");
      assert.ok(checkpointed < size, "killed before a checkpoint covered the leaves");
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await exited;
      const warden = await openWarden({ home, log: { origin: "warden.test/crash", checkpointIntervalMs: 3_600_000 } });
      try {
        const note = (await warden.log!.latestCheckpoint()).note;
        assert.equal(parseCheckpointText(parseNote(note).text).size, size);
        assert.equal((await warden.log!.status()).size, size);
      } finally {
        await warden.close();
      }
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
