/**
 * How push.bench.ts's side servers (bench/sink-side.ts, bench/bare-push-side.ts) run: on a free
 * loopback port, keeping connections open between a round's requests, announcing their URL as
 * their first stdout line (what the bench waits for), and closing on SIGTERM.
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";

export function listenAsSide(server: Server): void {
  server.keepAliveTimeout = 60_000;
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as AddressInfo;
    console.log(`http://127.0.0.1:${port}/`);
  });
  process.once("SIGTERM", () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}
