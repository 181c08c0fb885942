/**
 * The node's signing keys in the embedded backend: `<home>/keys/ed25519-NNNNNN.json`, one private
 * file (0600) per key, numbered in creation order; the highest number is the active key.
 *
 * Every key file is published create-new (link(2) of a fsynced temp file), so two first uses —
 * in one process or in several — race for `ed25519-000001.json`: exactly one wins, and the loser
 * loads the winner's key. A rotation races the same way for the next number.
 *
 * A publisher that died between the link and the unlink of its temp name leaves the key with two
 * links, which the private-file rules refuse. The second name is then recognized (our temp name
 * for that key, the same inode, linked longer ago than any live publisher takes) and removed, so a
 * crash while a key was created never keeps the node from starting.
 */
import { readdirSync } from "node:fs";
import * as fsp from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { IntegrityError, UnsafeStorageError, errnoCode, isWardenError } from "../../../core/errors.js";
import {
  TEMP_PREFIX,
  checkPrivateDirSync,
  ensurePrivateDirSync,
  publishNewFile,
  readPrivateFile,
} from "../../../storage/secure-fs.js";
import { decodeBase64Strict } from "../../../core/base64.js";
import { generateSigningKey, signingKeyFromPkcs8 } from "../../../journal/keys.js";
import type { KeyStore, PublicKeyRecord, SigningKey } from "../../../journal/types.js";

const KEY_FILE_RE = /^ed25519-(\d{6})\.json$/;
const KEY_FILE_MAX_BYTES = 4096;
/** How long a key file may carry a publisher's second link before it counts as unsafe. */
const PUBLISH_WINDOW_MS = 2000;

interface KeyFile {
  v: 1;
  key_id: string;
  public_key: string;
  private_pkcs8: string;
  created_at: string;
}

function keyFileName(n: number): string {
  return `ed25519-${String(n).padStart(6, "0")}.json`;
}

export interface EmbeddedKeyStoreOptions {
  /** how long a key may carry a publisher's second link before it is taken for a crash's leftover, ms */
  readonly publishWindowMs?: number;
}

export class EmbeddedKeyStore implements KeyStore {
  readonly dir: string;
  readonly #loaded = new Map<number, SigningKey>();
  readonly #publishWindowMs: number;

  constructor(dir: string, options: EmbeddedKeyStoreOptions = {}) {
    this.dir = dir;
    this.#publishWindowMs = options.publishWindowMs ?? PUBLISH_WINDOW_MS;
  }

  async active(): Promise<SigningKey> {
    ensurePrivateDirSync(this.dir, { create: true, recursive: true });
    for (;;) {
      const newest = this.#scan().at(-1);
      if (newest !== undefined) return this.#load(newest);
      await this.#publish(1);
    }
  }

  async rotate(): Promise<SigningKey> {
    ensurePrivateDirSync(this.dir, { create: true, recursive: true });
    for (;;) {
      const next = (this.#scan().at(-1) ?? 0) + 1;
      const key = await this.#publish(next);
      if (key !== undefined) return key;
      // A concurrent rotation took that number: take the one after it.
    }
  }

  /** Every key of this node, oldest first; none (and nothing created) when the directory is missing. */
  async publicKeys(): Promise<readonly PublicKeyRecord[]> {
    try {
      checkPrivateDirSync(this.dir);
    } catch (error) {
      if (isWardenError(error)) throw error;
      if (errnoCode(error) === "ENOENT") return [];
      throw error;
    }
    const records: PublicKeyRecord[] = [];
    for (const n of this.#scan()) {
      const key = await this.#load(n);
      records.push({ key_id: key.key_id, public_key: key.public_key });
    }
    return records;
  }

  /** Key numbers present, ascending; refuses names that are not key files (G10). */
  #scan(): number[] {
    const numbers: number[] = [];
    for (const name of readdirSync(this.dir)) {
      if (name.startsWith(TEMP_PREFIX)) continue; // a publish in progress, or one a crash interrupted
      const match = KEY_FILE_RE.exec(name);
      const n = match === null ? 0 : Number(match[1]);
      if (n < 1) throw new UnsafeStorageError("unsafe-storage-name", join(this.dir, name), "is not a key file (ed25519-NNNNNN.json)");
      numbers.push(n);
    }
    return numbers.sort((a, b) => a - b);
  }

  /** Creates key `n` create-new; undefined when that number already exists. */
  async #publish(n: number): Promise<SigningKey | undefined> {
    const { key, privatePkcs8 } = generateSigningKey();
    const file: KeyFile = {
      v: 1,
      key_id: key.key_id,
      public_key: key.public_key,
      private_pkcs8: Buffer.from(privatePkcs8).toString("base64"),
      created_at: new Date().toISOString(),
    };
    if (!(await publishNewFile(join(this.dir, keyFileName(n)), JSON.stringify(file) + "\n"))) return undefined;
    this.#loaded.set(n, key);
    return key;
  }

  async #load(n: number): Promise<SigningKey> {
    const cached = this.#loaded.get(n);
    if (cached !== undefined) return cached;
    const path = join(this.dir, keyFileName(n));
    const key = parseKeyFile(path, await this.#readSettled(path));
    this.#loaded.set(n, key);
    return key;
  }

  /**
   * Reads a key file with the private-file checks. A publisher links its temp file to the key name
   * and then unlinks the temp, so for a moment the key has two links; only while its second link is
   * a publisher's temp name for it is the refusal retried. A second link older than the publish
   * window is a dead publisher's: that temp name is removed (the key's bytes are untouched).
   */
  async #readSettled(path: string): Promise<Buffer> {
    const deadline = Date.now() + this.#publishWindowMs;
    for (;;) {
      try {
        return await readPrivateFile(path, KEY_FILE_MAX_BYTES);
      } catch (error) {
        if (!isWardenError(error) || error.code !== "unsafe-storage-hard-link") throw error;
        const temp = await this.#publisherTemp(path);
        if (temp === undefined) throw error;
        if (temp !== true && Date.now() - temp.linkedAt > this.#publishWindowMs) await fsp.rm(temp.path, { force: true });
        else if (Date.now() >= deadline) throw error;
        else await sleep(5);
      }
    }
  }

  /**
   * The key's second link when it is a publisher's temp name for it, with when it was linked; true
   * when the key has one link by now; undefined when the second link is anything else.
   */
  async #publisherTemp(path: string): Promise<{ readonly path: string; readonly linkedAt: number } | true | undefined> {
    const name = path.slice(this.dir.length + 1);
    const target = await fsp.lstat(path);
    if (target.nlink === 1) return true;
    if (target.nlink === 2) {
      for (const entry of await fsp.readdir(this.dir)) {
        if (!entry.startsWith(`${TEMP_PREFIX}${name}.`)) continue;
        const temp = await fsp.lstat(join(this.dir, entry)).catch(() => undefined);
        // link(2) sets the inode's change time: the moment the key got its second name.
        if (temp !== undefined && temp.ino === target.ino && temp.dev === target.dev) return { path: join(this.dir, entry), linkedAt: target.ctimeMs };
      }
    }
    // The publisher may have unlinked its temp name while the directory was read.
    return (await fsp.lstat(path)).nlink === 1 ? true : undefined;
  }
}

function parseKeyFile(path: string, bytes: Buffer): SigningKey {
  const corrupt = (rule: string): IntegrityError =>
    new IntegrityError("key-file-corrupt", `key file ${path}: ${rule}`, { status: 500, details: { path } });
  let file: Partial<KeyFile>;
  try {
    file = JSON.parse(bytes.toString("utf8")) as Partial<KeyFile>;
  } catch {
    throw corrupt("not JSON");
  }
  if (typeof file !== "object" || file === null || file.v !== 1 || typeof file.private_pkcs8 !== "string") {
    throw corrupt("not a version 1 key file");
  }
  const pkcs8 = decodeBase64Strict(file.private_pkcs8);
  if (pkcs8 === undefined) throw corrupt("private_pkcs8 is not standard base64");
  let key: SigningKey;
  try {
    key = signingKeyFromPkcs8(pkcs8);
  } catch {
    throw corrupt("private_pkcs8 is not an Ed25519 PKCS#8 key");
  }
  if (key.key_id !== file.key_id || key.public_key !== file.public_key) throw corrupt("key_id or public_key does not match the private key");
  return key;
}
