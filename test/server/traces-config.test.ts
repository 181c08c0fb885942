/**
 * A node whose OTEL_* environment asks for traces warden cannot send (DESIGN.md "Traces") refuses
 * to start with one readable line and its code, before any of its stores is opened: an operator's
 * exporter or protocol is never silently ignored.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { warden } from "../support/node.js";
import { tempDir } from "../support/temp.js";

describe("traces: an OTEL_* environment warden cannot honour", () => {
  const root = tempDir("traces-config");
  after(() => rmSync(root, { recursive: true, force: true }));

  for (const [name, env, code] of [
    ["an exporter other than otlp", { OTEL_TRACES_EXPORTER: "zipkin" }, "traces-exporter-unsupported"],
    ["a protocol other than http/json", { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "grpc" }, "traces-protocol-unsupported"],
  ] as const) {
    it(`${name}: refused with ${code}, no store opened`, async () => {
      const home = join(root, code);
      const run = await warden(["serve", "--home", home, "--listen", "127.0.0.1:0"], { env });
      assert.equal(run.code, 1, run.stdout + run.stderr);
      const last = run.stderr.trim().split("\n").at(-1) ?? "";
      assert.match(last, new RegExp(`^warden: .+ \\(${code}\\)$`), run.stderr);
      // What `serve` writes before it opens the node (its token, its lock) at most; no claims, no journals.
      const left = existsSync(home) ? readdirSync(home).filter((f) => f !== "token" && f !== "node.lock") : [];
      assert.deepEqual(left, []);
    });
  }
});
