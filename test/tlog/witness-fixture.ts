/** A C2SP tlog-witness (warden's own) on loopback, for the log's tests. */
import * as http from "node:http";
import * as path from "node:path";
import type { AddressInfo } from "node:net";
import { EmbeddedKeyStore } from "../../src/backends/embedded/journal/key-store.js";
import { ensurePrivateDirSync } from "../../src/storage/secure-fs.js";
import { verifierFor } from "../../src/tlog/cosignature.js";
import { parseVkey } from "../../src/tlog/note.js";
import { witnessHandler } from "../../src/witness/server.js";
import { SqliteWitnessStore } from "../../src/witness/store.js";
import { Witness } from "../../src/witness/witness.js";

export interface RunningWitness {
  readonly url: string;
  readonly vkey: string;
  stop(): Promise<void>;
}

/** Starts a witness of `logVkey` keeping its key and state in `dir` (the same dir again: the same witness restarted). */
export async function startWitness(dir: string, logVkey: string, port = 0): Promise<RunningWitness> {
  ensurePrivateDirSync(dir, { create: true, recursive: true });
  const key = await new EmbeddedKeyStore(path.join(dir, "keys")).active();
  const store = new SqliteWitnessStore(dir);
  const log = parseVkey(logVkey, verifierFor);
  const witness = new Witness({ name: "witness.test/w1", key, logs: [log], store });
  const server = http.createServer(witnessHandler(witness, [log.name]));
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    vkey: witness.vkey,
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      store.close();
    },
  };
}

