/**
 * The floor of push.bench.ts's (a): the least a receiver must do to take a push durably, in a
 * process of its own as warden's node is there, with nothing of warden in it.
 *
 *   node --import tsx bench/bare-push-side.ts <directory>
 *
 * runs a node:http server on a free loopback port (started with the I/O threads a node has,
 * AS_LAUNCHED_ENV) that, per push:
 *   POST /<push>/begin        makes the push's directory (0700) under <directory>;
 *   PUT  /<push>/<n>          takes a pack: files n, n + 1, … back to back, their lengths in
 *                             `x-lengths` (the client packs whole files up to the push's request
 *                             size, as warden's client packs blobs); creates each (0600, new),
 *                             feeds each piece to a sha256 as it arrives and writes it, fdatasyncs
 *                             and closes it, then answers 204 with the digests (what G8 asks of
 *                             an upload);
 *   POST /<push>/commit       takes the bundle digest over the kept bytes in file order (DESIGN's
 *                             framing), fsyncs the push's directory and its parent, and answers it.
 * Nothing is checked beyond that: no token, no manifest, no limits, no content-addressed store, no
 * database, and the bytes are kept in memory until the commit instead of being read back. Its
 * first stdout line is its URL; SIGTERM closes it.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { join } from "node:path";
import { listenAsSide } from "./side-listen.js";

const root = process.argv[2];
if (root === undefined) {
  console.error("usage: bare-push-side.ts <directory>");
  process.exit(2);
}
const BUNDLE_DOMAIN = Buffer.from("g4a-bundle-v1\0");
/** Each push's files' bytes, by file number, until its commit. */
const kept = new Map<string, Buffer[][]>();

const open = (path: string): Promise<number> =>
  new Promise((resolve, reject) => {
    const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
    fs.open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600, (error, fd) => (error === null ? resolve(fd) : reject(error)));
  });
const syncDir = (path: string): Promise<void> => {
  const fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  return new Promise<void>((resolve, reject) => fs.fsync(fd, (error) => (error === null ? resolve() : reject(error)))).finally(() => fs.closeSync(fd));
};

/**
 * One file being received: its bytes hashed as they arrive and written, whatever has arrived in
 * one writev while the previous write runs (so a slow write never holds the socket); at its end,
 * fdatasynced and closed.
 */
class FileIn {
  readonly #hash = createHash("sha256");
  readonly #opened: Promise<number>;
  #pending: Buffer[] = [];
  #writing = false;
  #ended = false;
  #settle!: { resolve: (digest: string) => void; reject: (error: Error) => void };
  readonly done: Promise<string>;

  constructor(
    path: string,
    readonly kept: Buffer[],
  ) {
    this.done = new Promise((resolve, reject) => (this.#settle = { resolve, reject }));
    this.#opened = open(path);
    this.#opened.catch((error: Error) => this.#settle.reject(error));
  }

  take(piece: Buffer): void {
    this.#hash.update(piece);
    this.kept.push(piece);
    this.#pending.push(piece);
    if (!this.#writing) this.#flush();
  }

  end(): void {
    this.#ended = true;
    if (!this.#writing) this.#flush();
  }

  #flush(): void {
    this.#writing = true;
    void this.#opened.then((fd) => {
      const fail = (error: Error): void => {
        fs.closeSync(fd);
        this.#settle.reject(error);
      };
      if (this.#pending.length > 0) {
        const batch = this.#pending;
        this.#pending = [];
        writevAll(fd, batch, (error) => (error === null ? this.#flush() : fail(error)));
      } else if (this.#ended) {
        fs.fdatasync(fd, (error) => {
          if (error !== null) return fail(error);
          fs.closeSync(fd);
          this.#settle.resolve(this.#hash.digest("hex"));
        });
      } else {
        this.#writing = false;
      }
    });
  }
}

/** writev(2) of `batch` until all of it is written. */
function writevAll(fd: number, batch: Buffer[], callback: (error: Error | null) => void): void {
  fs.writev(fd, batch, null, (error, written) => {
    if (error !== null) return callback(error);
    let rest = written;
    while (batch.length > 0 && rest >= batch[0]!.byteLength) rest -= batch.shift()!.byteLength;
    if (batch.length === 0) return callback(null);
    batch[0] = batch[0]!.subarray(rest);
    writevAll(fd, batch, callback);
  });
}

/**
 * Takes a pack: files `first`, `first + 1`, … whose lengths `x-lengths` lists, back to back in
 * the body. Answers their digests once every one is synced.
 */
async function receivePack(req: IncomingMessage, dir: string, first: number, files: Buffer[][]): Promise<string[]> {
  const lengths = String(req.headers["x-lengths"] ?? "")
    .split(",")
    .map(Number);
  const taking: FileIn[] = [];
  let left = 0;
  /** The next file to fill, past any empty one (which has nothing to wait for). */
  const next = (): FileIn | undefined => {
    while (taking.length < lengths.length) {
      const n = first + taking.length;
      left = lengths[taking.length]!;
      const file = new FileIn(join(dir, String(n)), (files[n] = []));
      taking.push(file);
      if (left > 0) return file;
      file.end();
    }
    return undefined;
  };
  let file = next();
  await new Promise<void>((resolve, reject) => {
    req.on("data", (chunk: Buffer) => {
      for (let piece = chunk; piece.byteLength > 0 && file !== undefined; ) {
        const mine = piece.byteLength <= left ? piece : piece.subarray(0, left);
        file.take(mine);
        left -= mine.byteLength;
        piece = piece.subarray(mine.byteLength);
        if (left === 0) {
          file.end();
          file = next();
        }
      }
    });
    req.once("end", () => (file === undefined ? resolve() : reject(new Error("the pack ended before its last file"))));
    req.once("error", reject);
  });
  return Promise.all(taking.map((f) => f.done));
}

function bundleDigest(files: readonly Buffer[][]): string {
  const hash = createHash("sha256").update(BUNDLE_DOMAIN);
  files.forEach((pieces, n) => {
    const name = Buffer.from(String(n));
    const head = Buffer.alloc(4 + name.byteLength + 8);
    head.writeUInt32BE(name.byteLength, 0);
    name.copy(head, 4);
    head.writeBigUInt64BE(BigInt(pieces.reduce((sum, piece) => sum + piece.byteLength, 0)), 4 + name.byteLength);
    hash.update(head);
    for (const piece of pieces) hash.update(piece);
  });
  return hash.digest("hex");
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const [, push, step] = /^\/([a-z0-9-]+)\/([a-z0-9]+)$/.exec(req.url ?? "") ?? [];
  if (push === undefined || step === undefined) {
    res.writeHead(404).end();
    return;
  }
  const dir = join(root!, push);
  if (req.method === "POST" && step === "begin") {
    fs.mkdirSync(dir, { mode: 0o700 });
    kept.set(push, []);
    res.writeHead(204).end();
  } else if (req.method === "POST" && step === "commit") {
    const digest = bundleDigest(kept.get(push) ?? []);
    kept.delete(push);
    await Promise.all([syncDir(dir), syncDir(root!)]);
    res.writeHead(200, { "content-type": "text/plain" }).end(digest);
  } else if (req.method === "PUT" && /^[0-9]+$/.test(step)) {
    const digests = await receivePack(req, dir, Number(step), kept.get(push)!);
    res.writeHead(204, { "x-digests": digests.join(",") }).end();
  } else {
    res.writeHead(405).end();
  }
}

const server = createServer((req, res) => {
  handle(req, res).catch((error: unknown) => {
    console.error(error);
    res.writeHead(500).end();
  });
});
listenAsSide(server);
