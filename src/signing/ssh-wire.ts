/**
 * The SSH wire encoding (RFC 4251 §5) that keys, certificates and SSHSIG blobs use: uint32
 * big-endian lengths in front of strings and mpints. A reader over untrusted bytes: every read is
 * bounds-checked, and a malformed blob is one `SshWireError`, never an out-of-range slice.
 */

export class SshWireError extends Error {
  override readonly name = "SshWireError";
}

export class SshReader {
  readonly #bytes: Uint8Array;
  #at = 0;

  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
  }

  get offset(): number {
    return this.#at;
  }

  get done(): boolean {
    return this.#at === this.#bytes.byteLength;
  }

  #take(n: number, what: string): Uint8Array {
    if (n > this.#bytes.byteLength - this.#at) throw new SshWireError(`${what} runs past the end of the blob`);
    const out = this.#bytes.subarray(this.#at, this.#at + n);
    this.#at += n;
    return out;
  }

  byte(what: string): number {
    return this.#take(1, what)[0]!;
  }

  raw(n: number, what: string): Uint8Array {
    return this.#take(n, what);
  }

  uint32(what: string): number {
    const b = this.#take(4, what);
    return ((b[0]! << 24) >>> 0) + (b[1]! << 16) + (b[2]! << 8) + b[3]!;
  }

  uint64(what: string): bigint {
    const b = this.#take(8, what);
    return Buffer.from(b).readBigUInt64BE(0);
  }

  string(what: string): Uint8Array {
    return this.#take(this.uint32(`${what} length`), what);
  }

  /** A string that must be printable ASCII (key types, namespaces, principals' names are UTF-8: see `utf8`). */
  ascii(what: string): string {
    const bytes = this.string(what);
    for (const b of bytes) if (b < 0x20 || b > 0x7e) throw new SshWireError(`${what} is not printable ASCII`);
    return Buffer.from(bytes).toString("latin1");
  }

  utf8(what: string): string {
    const bytes = this.string(what);
    const text = Buffer.from(bytes).toString("utf8");
    if (!Buffer.from(text, "utf8").equals(bytes)) throw new SshWireError(`${what} is not UTF-8`);
    return text;
  }

  /** A non-negative mpint, as its magnitude without leading zero bytes. */
  mpint(what: string): Uint8Array {
    const bytes = this.string(what);
    if (bytes.byteLength === 0) return bytes;
    if ((bytes[0]! & 0x80) !== 0) throw new SshWireError(`${what} is negative`);
    if (bytes[0] === 0 && (bytes.byteLength === 1 || (bytes[1]! & 0x80) === 0)) throw new SshWireError(`${what} has a needless leading zero`);
    return bytes[0] === 0 ? bytes.subarray(1) : bytes;
  }

  end(what: string): void {
    if (!this.done) throw new SshWireError(`${what} has ${this.#bytes.byteLength - this.#at} trailing bytes`);
  }
}

/** Writes the wire encoding (used for the data an SSHSIG signature covers). */
export class SshWriter {
  readonly #parts: Uint8Array[] = [];

  raw(bytes: Uint8Array | string): this {
    this.#parts.push(typeof bytes === "string" ? Buffer.from(bytes, "utf8") : bytes);
    return this;
  }

  byte(n: number): this {
    this.#parts.push(Uint8Array.of(n));
    return this;
  }

  uint32(n: number): this {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    this.#parts.push(b);
    return this;
  }

  string(bytes: Uint8Array | string): this {
    const b = typeof bytes === "string" ? Buffer.from(bytes, "utf8") : bytes;
    return this.uint32(b.byteLength).raw(b);
  }

  /** A non-negative integer given as big-endian magnitude bytes. */
  mpint(magnitude: Uint8Array): this {
    let start = 0;
    while (start < magnitude.byteLength && magnitude[start] === 0) start++;
    const m = magnitude.subarray(start);
    if (m.byteLength === 0) return this.uint32(0);
    return (m[0]! & 0x80) !== 0 ? this.uint32(m.byteLength + 1).byte(0).raw(m) : this.string(m);
  }

  bytes(): Buffer {
    return Buffer.concat(this.#parts);
  }
}
