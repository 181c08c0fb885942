/**
 * The server's JournalTap passes every append through as asked: a line the writer leaves unsynced
 * costs no fsync behind the tap either (the tap once dropped the option, so every line of every
 * run over HTTP was fsynced), listeners still hear of each append, and the appender's own read
 * stays reachable.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EmbeddedJournalStore } from "../../src/backends/embedded/journal/journal-store.js";
import { JournalTap } from "../../src/warden/journal-tap.js";

test("unsynced appends stay unsynced through the tap; listeners hear every append; read passes through", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "warden-tap-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  let syncs = 0;
  const tap = new JournalTap(new EmbeddedJournalStore(join(dir, "journals"), { hooks: { beforeSync: () => void syncs++ } }));
  const runId = randomUUID();
  const heard: string[] = [];
  tap.subscribe(runId, (signal) => heard.push(signal));
  const appender = await tap.create(runId);
  await appender.append(Buffer.from('{"n":1}\n'), { sync: false });
  await appender.append(Buffer.from('{"n":2}\n'), { sync: false });
  assert.equal(syncs, 0, "no fsync for lines written unsynced");
  await appender.append(Buffer.from('{"n":3}\n'));
  assert.equal(syncs, 1, "one fsync covers the synced line and those before it");
  assert.deepEqual(heard, ["appended", "appended", "appended"]);
  assert.equal(typeof appender.read, "function");
  assert.equal(Buffer.from((await appender.read!(1024))!).toString(), '{"n":1}\n{"n":2}\n{"n":3}\n');
  await appender.close();
  assert.deepEqual(heard.at(-1), "closed");
  assert.equal(tap.appends, 3);
});
