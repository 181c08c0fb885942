/**
 * The live event stream of a run (GET /v1/runs/{run_id}/events) follows its journal reading each
 * byte once: a watcher of a long run costs reads in proportion to the journal, not to its square.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { OPERATOR, openTestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";

/** Bytes this process has read so far, from files and sockets alike (Linux /proc/self/io `rchar`). */
function bytesRead(): number {
  const match = /^rchar: (\d+)$/m.exec(fs.readFileSync("/proc/self/io", "utf8"));
  assert.ok(match !== null, "/proc/self/io has rchar");
  return Number(match[1]);
}

describe("a run's live event stream", () => {
  it("reads each journal byte once however many lines are appended while it is watched", async () => {
    const root = tempDir("server-journal-events");
    const node = await openTestNode(root);
    let request: http.ClientRequest | undefined;
    try {
      await node.app.listen({ host: "127.0.0.1", port: 0 });
      const port = (node.app.server.address() as AddressInfo).port;
      const runId = randomUUID();
      const journal = await node.warden.journalTap.create(runId);
      const line = (seq: number, type: string): Buffer =>
        Buffer.from(`${JSON.stringify({ entry: { seq, event: { type, pad: "x".repeat(400) } } })}\n`);
      await journal.append(line(0, "run.started"));

      // The stream's messages as they arrive; `received(n)` waits for the n-th.
      const messages: string[] = [];
      let waiter: { n: number; resolve: () => void } | undefined;
      let ended: () => void = () => undefined;
      const end = new Promise<void>((resolve) => (ended = resolve));
      await new Promise<void>((resolve, reject) => {
        request = http.get(`http://127.0.0.1:${port}/v1/runs/${runId}/events`, { headers: OPERATOR, agent: false }, (response) => {
          assert.equal(response.statusCode, 200);
          let buffered = "";
          response.setEncoding("utf8").on("data", (text: string) => {
            buffered += text;
            for (let cut = buffered.indexOf("\n\n"); cut >= 0; cut = buffered.indexOf("\n\n")) {
              messages.push(buffered.slice(0, cut));
              buffered = buffered.slice(cut + 2);
            }
            if (waiter !== undefined && messages.length >= waiter.n) waiter.resolve();
          });
          response.on("end", () => ended());
          resolve();
        });
        request.on("error", reject);
      });
      const received = (n: number): Promise<void> =>
        messages.length >= n ? Promise.resolve() : new Promise((resolve) => (waiter = { n, resolve }));
      await received(1);

      // One line at a time, each delivered before the next is written: one read per line.
      const lines = 400;
      const before = bytesRead();
      for (let seq = 1; seq <= lines; seq++) {
        await journal.append(line(seq, seq === lines ? "run.terminated" : "note"));
        await received(seq + 1);
      }
      const read = bytesRead() - before;
      await journal.close();
      await end;

      const size = journal.size;
      assert.deepEqual(
        messages.filter((m) => m.startsWith("id: ")).map((m) => Number(/^id: (\d+)/.exec(m)![1])),
        [...Array(lines + 1).keys()],
      );
      assert.match(messages.at(-1)!, /^event: end\ndata: \{"reason":"terminated"\}$/);
      // Each byte is read from the store once and from the socket once (plus the stream's framing
      // and the requests' other reads); re-reading the journal per line would read ~lines/2 times it.
      assert.ok(read < 6 * size, `read ${read} bytes while streaming a journal of ${size}`);
    } finally {
      request?.destroy();
      await node.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
