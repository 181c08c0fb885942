import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, randomUUID, sign, type KeyObject } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { EmbeddedJournalStore } from "../../src/backends/embedded/journal/journal-store.js";
import { EmbeddedKeyStore } from "../../src/backends/embedded/journal/key-store.js";
import { publicKeyRecord } from "../../src/journal/keys.js";
import { verifyJournal } from "../../src/journal/verify.js";
import { JournalWriter } from "../../src/journal/writer.js";
import type { JournalEvent } from "../../src/journal/types.js";
import { cliCommand } from "../support/node.js";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function warden(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [...cliCommand, ...args],
      { cwd: repo, env: { ...process.env, WARDEN_HOME: "", ...env } },
      (error, stdout, stderr) => done({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

function assertOneCleanErrorLine(run: Run): void {
  assert.equal(run.code, 1);
  const lines = run.stderr.trimEnd().split("\n");
  assert.equal(lines.length, 1, `one line on stderr, got: ${run.stderr}`);
  assert.match(lines[0]!, /^warden: /);
  assert.doesNotMatch(run.stderr, /\n\s+at /, "no stack trace");
}

/**
 * A journal made the way another implementation would: JSON assembled by hand in canonical key
 * order, signed with node:crypto directly — none of warden's encoder, canonicalizer or writer.
 */
function independentJournal(privateKey: KeyObject = generateKeyPairSync("ed25519").privateKey): { bytes: Buffer; publicKey: string; lines: string[] } {
  const publicKey = createPublicKey(privateKey);
  const raw = Buffer.from(publicKey.export({ format: "jwk" }).x!, "base64url");
  const keyId = createHash("sha256").update(raw).digest("hex").slice(0, 16);
  const runId = "6f1c1a7e-3b7a-4c1e-9a55-0d8a1c2b3e4f";
  const digest = (s: string): string => `sha256:${createHash("sha256").update(s).digest("hex")}`;
  const events = [
    `{"agent":"codex","invocation":{"id":"job-7","request_hash":"${digest("req")}","scope":"cli:ops"},"provider":"codex","type":"run.started"}`,
    `{"effect_id":"p1","fingerprint":"${digest("make all")}","kind":"process","name":"make","type":"effect.started"}`,
    `{"effect_id":"p1","outcome":"succeeded","type":"effect.finished"}`,
    `{"text":"café ✓ \\"quoted\\"\\n","tokens":[1,2.5,-3],"type":"note"}`,
    `{"reason":"completed","result_hash":"${digest("result")}","type":"run.terminated"}`,
  ];
  let prev = "0".repeat(64);
  const lines = events.map((event, seq) => {
    const e = `{"event":${event},"key_id":"${keyId}","prev":"${prev}","run_id":"${runId}","seq":${seq},"ts":"2026-03-04T05:06:07.${String(100 + seq)}Z","v":1}`;
    const sig = sign(null, Buffer.from(`warden-journal-v1\n${e}`, "utf8"), privateKey).toString("base64");
    const line = `{"entry":${e},"sig":"${sig}"}\n`;
    prev = createHash("sha256").update(line, "utf8").digest("hex");
    return line;
  });
  return { bytes: Buffer.from(lines.join(""), "utf8"), publicKey: raw.toString("base64"), lines };
}

describe("warden CLI: journal verify", () => {
  const dir = mkdtempSync(join(tmpdir(), "warden-cli-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const foreign = independentJournal();
  const foreignFile = join(dir, "independent.ndjson");
  writeFileSync(foreignFile, foreign.bytes);
  const keyFile = join(dir, "independent.pub");
  writeFileSync(keyFile, `  ${foreign.publicKey}\n\n`);

  it("--help and --version", async () => {
    const [help, version, verifyHelp] = await Promise.all([warden(["--help"]), warden(["--version"]), warden(["journal", "verify", "--help"])]);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /Usage: warden/);
    assert.match(help.stdout, /journal/);
    assert.equal(version.code, 0);
    const pkg = JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as { version: string };
    assert.equal(version.stdout.trim(), pkg.version);
    assert.equal(verifyHelp.code, 0);
    for (const flag of ["--key", "--home", "--json"]) assert.ok(verifyHelp.stdout.includes(flag), flag);
  });

  it("accepts a journal from an independent implementation with --key, as text and as JSON", async () => {
    const [text, json] = await Promise.all([warden(["journal", "verify", foreignFile, "--key", keyFile]), warden(["journal", "verify", foreignFile, "--key", keyFile, "--json"])]);
    assert.equal(text.code, 0, text.stdout + text.stderr);
    assert.match(text.stdout, /^OK .*: 5 entries verified/);
    assert.equal(json.code, 0);
    const report = JSON.parse(json.stdout) as Record<string, unknown>;
    assert.deepEqual(report, {
      ok: true,
      entries: 5,
      requires_reconciliation: false,
      reasons: [],
      tail_hash: createHash("sha256").update(foreign.lines[4]!).digest("hex"),
    });
  });

  it("accepts it in the library too, and one signed by hand with the node's own key without --key", async () => {
    assert.equal(verifyJournal(foreign.bytes, [publicKeyRecord(foreign.publicKey)]).ok, true);
    const home = join(dir, "hand-signed-home");
    const nodeKey = await new EmbeddedKeyStore(join(home, "keys")).active();
    // Take the private key straight from the key file, as an operator's own tool could.
    const file = JSON.parse(readFileSync(join(home, "keys", "ed25519-000001.json"), "utf8")) as { private_pkcs8: string };
    const handSigned = independentJournal(createPrivateKey({ key: Buffer.from(file.private_pkcs8, "base64"), format: "der", type: "pkcs8" }));
    assert.equal(handSigned.publicKey, nodeKey.public_key);
    const journal = join(dir, "hand-signed.ndjson");
    writeFileSync(journal, handSigned.bytes);
    const run = await warden(["journal", "verify", journal, "--home", home]);
    assert.equal(run.code, 0, run.stdout + run.stderr);
    assert.match(run.stdout, /^OK .*: 5 entries verified/);
  });

  it("names the first bad line and seq in one line, exits 1; --json carries first_error", async () => {
    const damaged = Buffer.from(foreign.bytes);
    const third = foreign.lines[0]!.length + foreign.lines[1]!.length; // ASCII lines: chars = bytes
    damaged[third + 30] = damaged[third + 30]! ^ 0x04;
    const file = join(dir, "damaged.ndjson");
    writeFileSync(file, damaged);
    const [text, json] = await Promise.all([warden(["journal", "verify", file, "--key", keyFile]), warden(["journal", "verify", file, "--key", keyFile, "--json"])]);
    assert.equal(text.code, 1);
    const out = text.stdout.trimEnd().split("\n");
    assert.equal(out.length, 1);
    assert.match(out[0]!, /^FAIL .*: line 3 \(seq 2\): journal-[a-z-]+: /);
    assert.equal(json.code, 1);
    const report = JSON.parse(json.stdout) as { ok: boolean; entries: number; first_error: { line: number; seq: number; code: string }; requires_reconciliation: boolean; reasons: Array<{ reason: string }> };
    assert.equal(report.ok, false);
    assert.equal(report.entries, 2);
    assert.equal(report.first_error.line, 3);
    assert.equal(report.first_error.seq, 2);
    assert.equal(report.requires_reconciliation, true);
    assert.ok(report.reasons.some((r) => r.reason === "verification-failed"));
  });

  it("without --key trusts the node's keys from --home or $WARDEN_HOME, across a rotation; refuses a foreign key", async () => {
    const home = join(dir, "home");
    const keys = new EmbeddedKeyStore(join(home, "keys"));
    const store = new EmbeddedJournalStore(join(home, "journals"));
    const writer = await JournalWriter.create({ store, key: await keys.active(), runId: randomUUID() });
    const events: JournalEvent[] = [
      { type: "run.started", invocation: { scope: "api:ops", id: "x", request_hash: `sha256:${"0".repeat(64)}` }, agent: "claude" },
      { type: "effect.started", effect_id: "t", kind: "tool", name: "grep", fingerprint: "f" },
    ];
    for (const event of events) await writer.append(event);
    await writer.close();
    await keys.rotate();
    const journal = store.pathOf(writer.runId);
    const [viaFlag, viaEnv, foreignRun] = await Promise.all([
      warden(["journal", "verify", journal, "--home", home]),
      warden(["journal", "verify", journal, "--json"], { WARDEN_HOME: home }),
      warden(["journal", "verify", foreignFile, "--home", home]),
    ]);
    assert.equal(viaFlag.code, 0, viaFlag.stdout + viaFlag.stderr);
    assert.match(viaFlag.stdout, /^OK .*: 2 entries verified/);
    assert.match(viaFlag.stdout, /requires reconciliation: not-terminated, effect-not-finished \(t\)/);
    assert.equal(viaEnv.code, 0);
    const report = JSON.parse(viaEnv.stdout) as { ok: boolean; requires_reconciliation: boolean; reasons: Array<{ reason: string }> };
    assert.equal(report.ok, true);
    assert.equal(report.requires_reconciliation, true);
    assert.deepEqual(report.reasons.map((r) => r.reason), ["not-terminated", "effect-not-finished"]);
    assert.equal(foreignRun.code, 1);
    assert.match(foreignRun.stdout, /line 1 \(seq 0\): journal-unknown-key/);
  });

  it("reports an incomplete last line", async () => {
    const file = join(dir, "cut.ndjson");
    writeFileSync(file, foreign.bytes.subarray(0, foreign.bytes.byteLength - 20));
    const run = await warden(["journal", "verify", file, "--key", keyFile]);
    assert.equal(run.code, 1);
    assert.match(run.stdout, /line 5 \(seq 4\): journal-incomplete-line/);
  });

  it("errors are one clear line on stderr with exit 1", async () => {
    const badKey = join(dir, "bad.pub");
    writeFileSync(badKey, "not a key\n");
    const [missing, noKeys, wrongKey, usage] = await Promise.all([
      warden(["journal", "verify", join(dir, "nope.ndjson"), "--key", keyFile]),
      warden(["journal", "verify", foreignFile, "--home", join(dir, "empty-home")]),
      warden(["journal", "verify", foreignFile, "--key", badKey]),
      warden(["journal", "verify"]),
    ]);
    assertOneCleanErrorLine(missing);
    assert.match(missing.stderr, /nope\.ndjson: no such file/);
    assertOneCleanErrorLine(noKeys);
    assert.match(noKeys.stderr, /no-trusted-keys/);
    assertOneCleanErrorLine(wrongKey);
    assert.match(wrongKey.stderr, /invalid-public-key/);
    assert.equal(usage.code, 1);
    assert.match(usage.stderr, /missing required argument/);
  });
});
