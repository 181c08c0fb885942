/**
 * `warden witness` over HTTP (node:http, no framework): `POST /add-checkpoint` and
 * `GET /<sha256(origin) hex>/checkpoint`, as C2SP tlog-witness specifies them; anything else 404.
 */
import { createHash } from "node:crypto";
import * as http from "node:http";
import type { Witness } from "./witness.js";

const MAX_BODY_BYTES = 64 * 1024;

export function witnessHandler(witness: Witness, origins: readonly string[]): http.RequestListener {
  const byHash = new Map(origins.map((o) => [createHash("sha256").update(o, "utf8").digest("hex"), o]));
  return (request, response) => {
    const send = (status: number, type: string, body: string): void => {
      response.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) });
      response.end(body);
    };
    const url = (request.url ?? "/").split("?")[0]!;
    if (request.method === "POST" && url === "/add-checkpoint") {
      const chunks: Buffer[] = [];
      let size = 0;
      request.on("data", (chunk: Buffer) => {
        size += chunk.byteLength;
        if (size > MAX_BODY_BYTES) {
          send(413, "text/plain; charset=utf-8", "body too large\n");
          request.destroy();
        } else chunks.push(chunk);
      });
      request.on("end", () => {
        if (size > MAX_BODY_BYTES) return;
        try {
          const answer = witness.addCheckpoint(Buffer.concat(chunks).toString("utf8"));
          send(answer.status, answer.type, answer.body);
        } catch (error) {
          send(500, "text/plain; charset=utf-8", `${error instanceof Error ? error.message : String(error)}\n`);
        }
      });
      return;
    }
    const monitor = /^\/([0-9a-f]{64})\/checkpoint$/.exec(url);
    if (request.method === "GET" && monitor !== null) {
      const origin = byHash.get(monitor[1]!);
      const note = origin === undefined ? undefined : witness.checkpoint(origin);
      if (note !== undefined) return send(200, "text/plain; charset=utf-8", note);
    }
    send(404, "text/plain; charset=utf-8", "not found\n");
  };
}
