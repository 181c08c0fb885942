/** `HOST:PORT` (IPv6 as `[::1]:PORT`) of the node's listener. */
import { ValidationError } from "../core/errors.js";

export interface ListenAddress {
  readonly host: string;
  /** 0 picks a free port */
  readonly port: number;
}

export const DEFAULT_LISTEN: ListenAddress = Object.freeze({ host: "127.0.0.1", port: 7420 });

export function parseListen(text: string): ListenAddress {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(text);
  const port = match === null ? NaN : Number(match[3]);
  if (match === null || !Number.isInteger(port) || port > 65535) {
    throw new ValidationError("config-listen-invalid", `listen address ${JSON.stringify(text)} is not HOST:PORT (port 0–65535)`);
  }
  return { host: (match[1] ?? match[2]) as string, port };
}

/** The URL clients use for a listening address (IPv6 hosts in brackets). */
export function urlOf(address: ListenAddress): string {
  const host = address.host.includes(":") ? `[${address.host}]` : address.host;
  return `http://${host}:${address.port}`;
}
