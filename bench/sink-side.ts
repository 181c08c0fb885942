/**
 * The bare HTTP sink of push.bench.ts's ceiling figure, in a process of its own as warden's node
 * is there: `node bench/sink-side.ts` runs a node:http server on a free loopback port that reads
 * each request's body and drops it (nothing hashed, nothing stored), answering 204; `GET /cpu`
 * answers this process's CPU time so far (µs, all threads). Its first stdout line is its URL;
 * SIGTERM closes it.
 */
import { createServer } from "node:http";
import { listenAsSide } from "./side-listen.js";

const server = createServer((req, res) => {
  if (req.method === "GET" && req.url === "/cpu") {
    const { user, system } = process.cpuUsage();
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ micros: user + system }));
    return;
  }
  let bytes = 0;
  req.on("data", (piece: Buffer) => {
    bytes += piece.byteLength;
  });
  req.on("end", () => res.writeHead(204, { "x-bytes": String(bytes) }).end());
});
listenAsSide(server);
