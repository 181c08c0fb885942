/**
 * A running node: the Warden opened on the configured home, the HTTP server listening, and
 * `<home>/node.json` published. `close` is the graceful shutdown: stop accepting and finish
 * in-flight requests (chunk writes included), end event streams, let running agents finish
 * within the grace period (runs cut after it read `unresolved` and are never re-run), close the
 * stores, remove node.json.
 */
import type { AddressInfo } from "node:net";
import type { ServeConfig } from "../config/serve-config.js";
import { urlOf } from "../config/listen.js";
import { openWarden, type ShutdownEvent, type Warden } from "../warden/facade.js";
import { createServer, type CreateServerOptions } from "./app.js";
import type { App } from "./context.js";
import type { ListenReservation } from "./listen-reservation.js";
import { removeNodeFile, writeNodeFile } from "./node-file.js";
import { packageVersion } from "./console/assets.js";

export interface RunningNode {
  readonly url: string;
  readonly warden: Warden;
  readonly app: App;
  /** `onProgress` is told what the shutdown waits for (running agents, the grace) and what it killed. */
  close(onProgress?: (event: ShutdownEvent) => void): Promise<void>;
}

export interface StartNodeOptions extends CreateServerOptions {
  /** the listening address, held since before the home was touched; freed just before listening */
  readonly reservation?: ListenReservation;
}

export async function startNode(config: ServeConfig, options: StartNodeOptions = {}): Promise<RunningNode> {
  const { reservation, ...serverOptions } = options;
  let warden: Warden;
  try {
    // Told once when the collector cannot take the node's spans: in the node's log, once it has one.
    const traces = config.warden.traces === false ? false : { version: serverOptions.version ?? packageVersion(), warn: (message: string) => app?.log.warn(message) };
    warden = await openWarden({ ...config.warden, traces });
  } catch (error) {
    await reservation?.release();
    throw error;
  }
  let app: App | undefined;
  try {
    app = await createServer(warden, config.server, serverOptions);
    const reaped = warden.reapedAgents;
    if (reaped.killed.length > 0) {
      app.log.warn({ pids: reaped.killed }, `killed ${reaped.killed.length} agent process(es) an earlier node on this home left running when it died`);
    } else if (!reaped.supported) {
      app.log.info("agents orphaned by a crashed node cannot be found on this platform (no /proc); after a crash, check for agents still running");
    }
    await reservation?.release();
    await app.listen({ host: config.listen.host, port: config.listen.port });
    const address = app.server.address() as AddressInfo;
    const url = urlOf({ host: config.listen.host, port: address.port });
    // Listed with the fleet's nodes; a node the database cannot hear now still serves (its row lacks the URL).
    await warden.announce({ url, version: serverOptions.version ?? packageVersion() }).catch((error: unknown) => app?.log.warn({ err: error }, "could not record this node's URL in the fleet's list"));
    await writeNodeFile(config.home, { url, pid: process.pid });
    const served = app;
    let closing: Promise<void> | undefined;
    return {
      url,
      warden,
      app: served,
      close(onProgress) {
        closing ??= (async () => {
          try {
            await served.close();
          } finally {
            try {
              await warden.close({ graceMs: config.shutdownGraceMs, ...(onProgress === undefined ? {} : { onProgress }) });
            } finally {
              removeNodeFile(config.home);
            }
          }
        })();
        return closing;
      },
    };
  } catch (error) {
    await reservation?.release();
    await app?.close().catch(() => undefined);
    await warden.close({ graceMs: 0 }).catch(() => undefined);
    throw error;
  }
}
