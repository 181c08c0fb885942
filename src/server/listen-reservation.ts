/**
 * The listening address, taken before a start writes anything: `warden serve` on a port another
 * process holds used to create a new home, write its operator token, open its stores and only
 * then fail to listen. A reservation is a plain TCP listener on the same address, held while the
 * node opens (so a second start racing for the port fails at once too) and closed just before the
 * HTTP server listens there.
 */
import * as net from "node:net";
import { ConflictError, errnoCode } from "../core/errors.js";
import { urlOf, type ListenAddress } from "../config/listen.js";

export interface ListenReservation {
  /** Frees the address for the node's own listener. */
  release(): Promise<void>;
}

const NOTHING_HELD: ListenReservation = { release: async () => undefined };

/** Holds `address`, or throws `address-in-use` when another process listens there. Port 0 needs no reservation. */
export async function reserveListenAddress(address: ListenAddress): Promise<ListenReservation> {
  if (address.port === 0) return NOTHING_HELD;
  const server = net.createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: address.host, port: address.port, exclusive: true }, () => {
      server.off("error", reject);
      resolve();
    });
  }).catch((error: unknown) => {
    if (errnoCode(error) !== "EADDRINUSE") throw error;
    const where = `${address.host}:${address.port}`;
    throw new ConflictError("address-in-use", `${where} is in use by another process: stop it, or give this node another --listen (port 0 picks a free one)`, {
      details: { url: urlOf(address) },
    });
  });
  let released: Promise<void> | undefined;
  return {
    release() {
      released ??= new Promise<void>((resolve) => server.close(() => resolve()));
      return released;
    },
  };
}
