/**
 * The OpenAPI document a node serves, checked by code we did not write: Redocly's CLI (a pinned
 * devDependency), its `recommended` rules, run offline on the very document `/openapi.json`
 * answers. Zero errors; every operation has an operationId (generated clients name their methods
 * after it) and a summary. One warning remains, on purpose: `/healthz` has no 4XX response, as it
 * takes no token, no body and no parameter, so nothing a client sends can be refused there.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { repo } from "../support/node.js";
import { openTestNode, type TestNode } from "../support/app-node.js";
import { tempDir } from "../support/temp.js";

interface LintReport {
  totals: { errors: number; warnings: number };
  problems: { ruleId: string; severity: string; message: string; location: { pointer: string }[] }[];
}

const REDOCLY = path.join(repo, "node_modules", "@redocly", "cli", "bin", "cli.js");
/** A closed loopback port: the lint must not need the network, and cannot reach it. */
const OFFLINE = "http://127.0.0.1:9";

describe("the served OpenAPI document passes Redocly's recommended rules", () => {
  let node: TestNode;
  let dir: string;
  let doc: { paths: Record<string, Record<string, { operationId?: string; summary?: string }>> };
  let report: LintReport;

  before(async () => {
    node = await openTestNode(tempDir("openapi-lint"));
    dir = fs.mkdtempSync(path.join(node.root, "lint-"));
    const served = await node.app.inject({ url: "/openapi.json" });
    assert.equal(served.statusCode, 200);
    doc = JSON.parse(served.payload) as typeof doc;
    fs.writeFileSync(path.join(dir, "openapi.json"), served.payload);
    // Exit 1 when it finds errors: the report on stdout says which, and is asserted below.
    const run = await promisify(execFile)(process.execPath, [REDOCLY, "lint", "openapi.json", "--extends", "recommended", "--format", "json"], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: dir,
        REDOCLY_TELEMETRY: "off",
        REDOCLY_SUPPRESS_UPDATE_NOTICE: "true",
        HTTPS_PROXY: OFFLINE,
        HTTP_PROXY: OFFLINE,
        https_proxy: OFFLINE,
        http_proxy: OFFLINE,
      },
      maxBuffer: 16 * 1024 * 1024,
    }).catch((error: { stdout?: string; stderr?: string }) => ({ stdout: error.stdout ?? "", stderr: error.stderr ?? "" }));
    report = JSON.parse(run.stdout) as LintReport;
  });
  after(async () => {
    await node.close();
    fs.rmSync(node.root, { recursive: true, force: true });
  });

  it("has zero errors, and only the one warning on /healthz", () => {
    const listed = report.problems.map((p) => `${p.severity} ${p.ruleId} ${p.location[0]?.pointer ?? ""}: ${p.message}`);
    assert.equal(report.totals.errors, 0, listed.join("\n"));
    assert.deepEqual(
      report.problems.map((p) => `${p.ruleId} ${p.location[0]?.pointer ?? ""}`),
      ["operation-4xx-response #/paths/~1healthz/get/responses"],
    );
  });

  it("names every operation (unique operationId) and sums it up", () => {
    const operations = Object.entries(doc.paths).flatMap(([route, methods]) => Object.entries(methods).map(([method, op]) => ({ at: `${method} ${route}`, ...op })));
    assert.ok(operations.length >= 22, `${operations.length} operations`);
    for (const op of operations) {
      assert.match(op.operationId ?? "", /^[a-z][A-Za-z]+$/, `${op.at} has an operationId`);
      assert.ok((op.summary ?? "").length > 0, `${op.at} has a summary`);
    }
    assert.equal(new Set(operations.map((op) => op.operationId)).size, operations.length, "operationIds are unique");
  });
});
