/**
 * The fleet's signing keys, in `warden_signing_keys`: numbered in creation order, the highest
 * number is the active key. Every node of a fleet signs with the same key, so a journal verifies
 * with the fleet's public keys whichever node wrote it.
 *
 * Creation is `INSERT … ON CONFLICT DO NOTHING` on the number: when several nodes start on an
 * empty database at once, exactly one key 1 is created and everyone loads it. A rotation races
 * the same way for the next number. The private keys live in the database: whoever can read
 * that table can sign as the fleet, so grant it to warden's role only.
 */
import { IntegrityError } from "../../core/errors.js";
import { generateSigningKey, signingKeyFromPkcs8 } from "../../journal/keys.js";
import type { KeyStore, PublicKeyRecord, SigningKey } from "../../journal/types.js";
import { query, type PgPool } from "./connection.js";

interface KeyRow {
  n: number;
  key_id: string;
  public_key: string;
  private_pkcs8: Buffer;
}

export class PostgresKeyStore implements KeyStore {
  readonly #pool: PgPool;
  readonly #loaded = new Map<number, SigningKey>();

  constructor(pool: PgPool) {
    this.#pool = pool;
  }

  async active(): Promise<SigningKey> {
    for (;;) {
      const newest = await this.#newest();
      if (newest !== undefined) return this.#load(newest);
      await this.#publish(1);
    }
  }

  async rotate(): Promise<SigningKey> {
    for (;;) {
      const next = ((await this.#newest())?.n ?? 0) + 1;
      const key = await this.#publish(next);
      if (key !== undefined) return key;
      // A concurrent rotation (on any node) took that number: take the one after it.
    }
  }

  async publicKeys(): Promise<readonly PublicKeyRecord[]> {
    const result = await query<KeyRow>(this.#pool, "read the public keys", {
      name: "warden-keys-all",
      text: "SELECT n, key_id, public_key, private_pkcs8 FROM warden_signing_keys ORDER BY n",
    });
    const records: PublicKeyRecord[] = [];
    for (const row of result.rows) {
      const key = this.#load(row);
      records.push({ key_id: key.key_id, public_key: key.public_key });
    }
    return records;
  }

  async #newest(): Promise<KeyRow | undefined> {
    const result = await query<KeyRow>(this.#pool, "read the active key", {
      name: "warden-keys-newest",
      text: "SELECT n, key_id, public_key, private_pkcs8 FROM warden_signing_keys ORDER BY n DESC LIMIT 1",
    });
    return result.rows[0];
  }

  /** Creates key `n`; undefined when that number already exists. */
  async #publish(n: number): Promise<SigningKey | undefined> {
    const { key, privatePkcs8 } = generateSigningKey();
    const result = await query(this.#pool, "create a signing key", {
      name: "warden-keys-insert",
      text:
        "INSERT INTO warden_signing_keys (n, key_id, public_key, private_pkcs8, created_at) VALUES ($1, $2, $3, $4, $5) " +
        "ON CONFLICT DO NOTHING",
      values: [n, key.key_id, key.public_key, Buffer.from(privatePkcs8), Date.now()],
    });
    if (result.rowCount !== 1) return undefined;
    this.#loaded.set(n, key);
    return key;
  }

  /** The signing key of a row, checked against its stored key id and public key. */
  #load(row: KeyRow): SigningKey {
    const cached = this.#loaded.get(row.n);
    if (cached !== undefined) return cached;
    const corrupt = (rule: string): IntegrityError =>
      new IntegrityError("key-record-corrupt", `signing key ${row.n}: ${rule}`, { status: 500, details: { n: row.n } });
    let key: SigningKey;
    try {
      key = signingKeyFromPkcs8(row.private_pkcs8);
    } catch {
      throw corrupt("private_pkcs8 is not an Ed25519 PKCS#8 key");
    }
    if (key.key_id !== row.key_id || key.public_key !== row.public_key) throw corrupt("key_id or public_key does not match the private key");
    this.#loaded.set(row.n, key);
    return key;
  }
}
