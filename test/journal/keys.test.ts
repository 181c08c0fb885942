import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, chownSync, linkSync, unlinkSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createHash, generateKeyPairSync, randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { EmbeddedKeyStore } from "../../src/backends/embedded/journal/key-store.js";
import {
  generateSigningKey,
  keyIdOf,
  parsePublicKey,
  publicKeyRecord,
  signingKeyFromPkcs8,
  verifyEd25519,
} from "../../src/journal/keys.js";
import { verifyJournal } from "../../src/journal/verify.js";
import { buildJournal, cleanRunEvents } from "./helpers.js";
import { tempDir } from "../support/temp.js";

const here = dirname(fileURLToPath(import.meta.url));

// RFC 8032 section 7.1, TEST 1.
const RFC_SEED = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const RFC_PUBLIC = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
const RFC_SIG =
  "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";
const PKCS8_ED25519_PREFIX = "302e020100300506032b657004220420";

describe("Ed25519 keys", () => {
  it("key_id is the first 8 bytes of sha256 of the raw public key, in lowercase hex", () => {
    assert.equal(keyIdOf(Buffer.from(RFC_PUBLIC, "hex")), "21fe31dfa154a261");
    assert.throws(() => keyIdOf(Buffer.alloc(31)), { code: "invalid-public-key" });
  });

  it("signs and verifies the RFC 8032 vector through a PKCS#8 key", () => {
    const key = signingKeyFromPkcs8(Buffer.from(PKCS8_ED25519_PREFIX + RFC_SEED, "hex"));
    assert.equal(key.public_key, Buffer.from(RFC_PUBLIC, "hex").toString("base64"));
    assert.equal(key.key_id, "21fe31dfa154a261");
    assert.equal(Buffer.from(key.sign(new Uint8Array(0))).toString("hex"), RFC_SIG);
    assert.equal(verifyEd25519(key.public_key, new Uint8Array(0), Buffer.from(RFC_SIG, "hex")), true);
  });

  it("a generated key round-trips through its PKCS#8 bytes; verification rejects any change", () => {
    const { key, privatePkcs8 } = generateSigningKey();
    const again = signingKeyFromPkcs8(privatePkcs8);
    assert.equal(again.key_id, key.key_id);
    assert.equal(again.public_key, key.public_key);
    assert.equal(key.key_id, createHash("sha256").update(Buffer.from(key.public_key, "base64")).digest("hex").slice(0, 16));
    const message = Buffer.from("warden-journal-v1\n{}");
    const sig = Buffer.from(key.sign(message));
    assert.equal(verifyEd25519(key.public_key, message, sig), true);
    assert.equal(verifyEd25519(key.public_key, Buffer.from("warden-journal-v1\n{ }"), sig), false);
    const bent = Buffer.from(sig);
    bent[10] = bent[10]! ^ 1;
    assert.equal(verifyEd25519(key.public_key, message, bent), false);
    assert.equal(verifyEd25519(key.public_key, message, sig.subarray(0, 63)), false);
    assert.equal(verifyEd25519(generateSigningKey().key.public_key, message, sig), false);
  });

  it("refuses malformed keys", () => {
    const ec = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "der", type: "pkcs8" });
    assert.throws(() => signingKeyFromPkcs8(ec), { code: "invalid-private-key" });
    assert.throws(() => signingKeyFromPkcs8(Buffer.from("nonsense")), { code: "invalid-private-key" });
    const pub = generateSigningKey().key.public_key;
    assert.equal(publicKeyRecord(pub).public_key, pub);
    assert.throws(() => parsePublicKey(pub.slice(0, -2)), { code: "invalid-public-key" }, "no padding");
    assert.throws(() => parsePublicKey(pub.replace(/\+/g, "-").replace(/\//g, "_").replace(/^./, "-")), { code: "invalid-public-key" }, "URL alphabet");
    assert.throws(() => parsePublicKey(Buffer.alloc(33).toString("base64")), { code: "invalid-public-key" });
    assert.throws(() => parsePublicKey(` ${pub}`), { code: "invalid-public-key" });
  });
});

describe("EmbeddedKeyStore", () => {
  const root = tempDir("keys", (fn) => after(fn));
  let n = 0;
  const freshDir = (): string => join(root, `home${n++}`, "keys");

  it("creates the key on first use as a private file and loads it afterwards", async () => {
    const dir = freshDir();
    assert.deepEqual(await new EmbeddedKeyStore(dir).publicKeys(), [], "listing creates nothing");
    assert.throws(() => statSync(dir), { code: "ENOENT" });
    const key = await new EmbeddedKeyStore(dir).active();
    const files = readdirSync(dir);
    assert.equal(files.length, 1);
    assert.equal(statSync(join(dir, files[0]!)).mode & 0o777, 0o600);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    const reloaded = new EmbeddedKeyStore(dir);
    assert.equal((await reloaded.active()).key_id, key.key_id);
    assert.deepEqual(await reloaded.publicKeys(), [{ key_id: key.key_id, public_key: key.public_key }]);
    // The reloaded key signs what the original verifies.
    const msg = Buffer.from("m");
    assert.equal(verifyEd25519(key.public_key, msg, (await reloaded.active()).sign(msg)), true);
  });

  it("concurrent first uses in one process end with one key", async () => {
    const dir = freshDir();
    const keys = await Promise.all(Array.from({ length: 8 }, () => new EmbeddedKeyStore(dir).active()));
    assert.equal(new Set(keys.map((k) => k.key_id)).size, 1);
    assert.deepEqual(readdirSync(dir), ["ed25519-000001.json"]);
  });

  it("concurrent first uses from several processes end with one key", async () => {
    const dir = freshDir();
    const go = join(root, `go-${randomUUID()}`);
    const children = Array.from({ length: 4 }, () =>
      spawn(process.execPath, ["--import", "tsx", join(here, "fixtures", "key-first-use.ts"), dir, go], { stdio: ["ignore", "pipe", "pipe"] }),
    );
    const outputs = children.map(
      (child) =>
        new Promise<string>((resolve, reject) => {
          let out = "";
          let err = "";
          child.stdout.on("data", (d: Buffer) => (out += d.toString()));
          child.stderr.on("data", (d: Buffer) => (err += d.toString()));
          child.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`child exited ${code}: ${err}`))));
        }),
    );
    const ready = children.map(
      (child) => new Promise<void>((resolve) => child.stdout.on("data", (d: Buffer) => d.toString().includes("ready") && resolve())),
    );
    await Promise.all(ready);
    writeFileSync(go, "");
    const reported = (await Promise.all(outputs)).map((out) => JSON.parse(out.trim().split("\n").at(-1)!) as { key_id: string });
    assert.equal(reported.length, 4);
    assert.equal(new Set(reported.map((r) => r.key_id)).size, 1, "every process uses the same key");
    assert.deepEqual(readdirSync(dir), ["ed25519-000001.json"], "exactly one key file, no temp files left");
    assert.equal((await new EmbeddedKeyStore(dir).active()).key_id, reported[0]!.key_id);
  });

  it("rotation makes a new key active and keeps old public keys, so old journals still verify", async () => {
    const dir = freshDir();
    const store = new EmbeddedKeyStore(dir);
    const first = await store.active();
    const oldJournal = buildJournal(cleanRunEvents(), first);
    const second = await store.rotate();
    assert.notEqual(second.key_id, first.key_id);
    assert.equal((await store.active()).key_id, second.key_id);
    const other = new EmbeddedKeyStore(dir);
    assert.equal((await other.active()).key_id, second.key_id, "another instance sees the rotation");
    const keys = await other.publicKeys();
    assert.deepEqual(keys.map((k) => k.key_id), [first.key_id, second.key_id], "oldest first");
    assert.equal(verifyJournal(oldJournal, keys).ok, true);
    assert.equal(verifyJournal(buildJournal(cleanRunEvents(), second), keys).ok, true);
    // Concurrent rotations each add their own key.
    const rotated = await Promise.all([new EmbeddedKeyStore(dir).rotate(), new EmbeddedKeyStore(dir).rotate(), store.rotate()]);
    assert.equal(new Set(rotated.map((k) => k.key_id)).size, 3);
    assert.equal((await other.publicKeys()).length, 5);
    assert.equal(verifyJournal(oldJournal, await other.publicKeys()).ok, true);
  });

  it("waits out a publisher's second link (its temp name) instead of refusing the key", async () => {
    const dir = freshDir();
    const key = await new EmbeddedKeyStore(dir).active();
    const file = join(dir, "ed25519-000001.json");
    // The state between a publisher's link(temp, key) and unlink(temp).
    const temp = join(dir, `.tmp-ed25519-000001.json.${"ab".repeat(8)}`);
    linkSync(file, temp);
    const loading = new EmbeddedKeyStore(dir).active();
    // The publisher's gap between its two calls, as a duration: the loader must wait it out. On a
    // busy machine the loader may only look after the unlink, and then sees a plain key (passes).
    await new Promise((resolve) => setTimeout(resolve, 60));
    unlinkSync(temp);
    assert.equal((await loading).key_id, key.key_id);
  });

  it("removes the second link a dead publisher left (its temp name, linked before the window), keeping the key", async () => {
    const dir = freshDir();
    const key = await new EmbeddedKeyStore(dir).active();
    const file = join(dir, "ed25519-000001.json");
    const bytes = readFileSync(file);
    // What a kill -9 between link(temp, key) and unlink(temp) leaves behind.
    const temp = join(dir, `.tmp-ed25519-000001.json.${"cd".repeat(8)}`);
    linkSync(file, temp);
    // Time itself is what is awaited: the leftover must be older than the publish window (100 ms).
    await new Promise((resolve) => setTimeout(resolve, 120));
    const restarted = new EmbeddedKeyStore(dir, { publishWindowMs: 100 });
    assert.equal((await restarted.active()).key_id, key.key_id);
    assert.deepEqual(readdirSync(dir), ["ed25519-000001.json"], "the leftover temp name is gone");
    assert.equal(statSync(file).nlink, 1);
    assert.ok(readFileSync(file).equals(bytes), "the key's bytes are untouched");
    assert.equal((await new EmbeddedKeyStore(dir).publicKeys()).length, 1);
  });

  it("refuses unsafe or corrupt key files and leaves them untouched", async () => {
    const setup = async (): Promise<{ dir: string; file: string }> => {
      const dir = freshDir();
      await new EmbeddedKeyStore(dir).active();
      return { dir, file: join(dir, "ed25519-000001.json") };
    };
    {
      const { dir, file } = await setup();
      chmodSync(file, 0o644);
      await assert.rejects(new EmbeddedKeyStore(dir).active(), { code: "unsafe-storage-mode" });
      await assert.rejects(new EmbeddedKeyStore(dir).publicKeys(), { code: "unsafe-storage-mode" });
      assert.equal(statSync(file).mode & 0o777, 0o644);
    }
    {
      const { dir, file } = await setup();
      linkSync(file, join(dirname(dir), "second-link"));
      await assert.rejects(new EmbeddedKeyStore(dir).active(), { code: "unsafe-storage-hard-link" });
      assert.equal(statSync(file).nlink, 2);
      // However old, a second link that is not a publisher's temp name for this key is never removed.
      // (Time itself is awaited: the link is made older than the publish window of 50 ms.)
      await new Promise((resolve) => setTimeout(resolve, 60));
      await assert.rejects(new EmbeddedKeyStore(dir, { publishWindowMs: 50 }).active(), { code: "unsafe-storage-hard-link" });
      assert.equal(statSync(file).nlink, 2);
    }
    {
      const { dir } = await setup();
      const victim = join(dirname(dir), "victim.json");
      writeFileSync(victim, "{}", { mode: 0o600 });
      symlinkSync(victim, join(dir, "ed25519-000002.json"));
      await assert.rejects(new EmbeddedKeyStore(dir).active(), { code: "unsafe-storage-symlink" });
      assert.equal(readFileSync(victim, "utf8"), "{}");
    }
    {
      const { dir } = await setup();
      writeFileSync(join(dir, "stray.txt"), "x", { mode: 0o600 });
      await assert.rejects(new EmbeddedKeyStore(dir).active(), { code: "unsafe-storage-name" });
    }
    {
      const { dir, file } = await setup();
      const content = JSON.parse(readFileSync(file, "utf8")) as { key_id: string };
      const other = join(dir, "ed25519-000002.json");
      writeFileSync(other, JSON.stringify({ ...content, key_id: "0000000000000000" }), { mode: 0o600 });
      await assert.rejects(new EmbeddedKeyStore(dir).active(), { code: "key-file-corrupt" });
    }
    {
      const { dir } = await setup();
      chmodSync(dir, 0o755);
      await assert.rejects(new EmbeddedKeyStore(dir).active(), { code: "unsafe-storage-mode" });
      await assert.rejects(new EmbeddedKeyStore(dir).publicKeys(), { code: "unsafe-storage-mode" });
    }
  });

  it("refuses a key file owned by another user", { skip: process.geteuid?.() !== 0 ? "needs root to chown" : false }, async () => {
    const dir = freshDir();
    await new EmbeddedKeyStore(dir).active();
    const file = join(dir, "ed25519-000001.json");
    chownSync(file, 12345, 12345);
    await assert.rejects(new EmbeddedKeyStore(dir).active(), { code: "unsafe-storage-owner" });
    assert.equal(statSync(file).uid, 12345);
  });
});
