/**
 * The server of push.bench.ts's tus comparator, in a process of its own as warden's node is there:
 * `node --import tsx bench/tus-side.ts <directory>` runs @tus/server with @tus/file-store keeping
 * uploads under <directory>, on a free loopback port, with the packages' defaults (FileStore never
 * fsyncs). Its first stdout line is its upload endpoint; SIGTERM closes it.
 */
import type { AddressInfo } from "node:net";
import { FileStore } from "@tus/file-store";
import { Server } from "@tus/server";

const directory = process.argv[2];
if (directory === undefined) {
  console.error("usage: tus-side.ts <directory>");
  process.exit(2);
}
const tus = new Server({ path: "/files", datastore: new FileStore({ directory }) });
const http = tus.listen(0, "127.0.0.1", () => {
  const { port } = http.address() as AddressInfo;
  console.log(`http://127.0.0.1:${port}/files`);
});
process.once("SIGTERM", () => {
  http.closeAllConnections();
  http.close(() => process.exit(0));
});
