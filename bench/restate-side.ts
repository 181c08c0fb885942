/**
 * The Restate comparator of invocations.bench.ts, in processes of its own as tus-side.ts is for the
 * push bench: `node --import tsx bench/restate-side.ts <directory>` starts restate-server 1.7.12
 * (the binary @restatedev/restate-server installs) with its state under <directory>, on loopback
 * ports of its own and otherwise its defaults, serves one service with @restatedev/restate-sdk on
 * loopback HTTP/2, registers it, and prints the ingress URL of its handler as its first stdout line.
 * The handler is warden's bench invocation: one journaled side effect (`ctx.run`), then a small
 * result. SIGTERM stops both (the server is killed: its state is scratch).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import { createServer as createHttp2Server } from "node:http2";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import * as restate from "@restatedev/restate-sdk";

const directory = process.argv[2];
if (directory === undefined) {
  console.error("usage: restate-side.ts <directory>");
  process.exit(2);
}

/** A loopback port nobody holds right now (restate-server binds it moments later). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createNetServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function serverBinary(): string {
  const require = createRequire(import.meta.url);
  const pkg = require.resolve("@restatedev/restate-server-linux-x64/package.json");
  return join(dirname(pkg), "bin", "restate-server");
}

// The SDK calls Promise.withResolvers (Node 22); this bench runs on Node 20, so it gets the
// standard one-line equivalent.
if (typeof (Promise as { withResolvers?: unknown }).withResolvers !== "function") {
  Object.defineProperty(Promise, "withResolvers", {
    configurable: true,
    writable: true,
    value: function withResolvers<T>() {
      let resolve!: (value: T | PromiseLike<T>) => void;
      let reject!: (reason?: unknown) => void;
      const promise = new Promise<T>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      return { promise, resolve, reject };
    },
  });
}

const bench = restate.service({
  name: "bench",
  handlers: {
    run: async (ctx: restate.Context, _request: unknown) => {
      await ctx.run("noop", () => 1);
      return { ok: true };
    },
  },
});

const endpoint = createHttp2Server(restate.endpoint().bind(bench).http2Handler());
await new Promise<void>((resolve) => endpoint.listen(0, "127.0.0.1", resolve));
const endpointPort = (endpoint.address() as AddressInfo).port;

const [ingress, admin, fabric, pgsql] = [await freePort(), await freePort(), await freePort(), await freePort()];
const server: ChildProcess = spawn(serverBinary(), ["--base-dir", directory, "--listen-mode", "tcp", "--no-logo"], {
  env: {
    ...process.env,
    RESTATE_BIND_ADDRESS: `127.0.0.1:${fabric}`,
    RESTATE_ADVERTISED_ADDRESS: `http://127.0.0.1:${fabric}/`,
    RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingress}`,
    RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${admin}`,
    RESTATE_ADMIN__QUERY_ENGINE__PGSQL_BIND_ADDRESS: `127.0.0.1:${pgsql}`,
    RESTATE_LOG_FILTER: "warn",
    DO_NOT_TRACK: "1",
  },
  stdio: ["ignore", "ignore", "inherit"],
});
let stopping = false;
server.once("exit", (code) => {
  if (stopping) return;
  console.error(`restate-server exited ${String(code)}`);
  process.exit(1);
});

/** Waits for restate-server's admin API to answer, then registers the endpoint. */
async function register(): Promise<void> {
  const deadline = Date.now() + 60_000;
  let last = "no answer yet";
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`http://127.0.0.1:${admin}/deployments`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ uri: `http://127.0.0.1:${endpointPort}`, force: true }),
      });
      if (res.ok) return;
      last = `${res.status} ${await res.text()}`;
    } catch (error) {
      last = String(error);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`restate-server's admin API did not register the endpoint within 60 s: ${last}`);
}

/** The ingress answers the handler once the registration reached it. */
async function ready(url: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  let last = "no answer yet";
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      if (res.ok) return;
      last = `${res.status} ${await res.text()}`;
    } catch (error) {
      last = String(error);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`restate's ingress did not serve the handler within 60 s: ${last}`);
}

const url = `http://127.0.0.1:${ingress}/bench/run`;
try {
  await register();
  await ready(url);
} catch (error) {
  console.error(String(error));
  server.kill("SIGKILL");
  process.exit(1);
}
console.log(url);

// The server's state is the bench's scratch directory: no graceful shutdown is worth waiting for.
process.once("exit", () => server.kill("SIGKILL"));
process.once("SIGTERM", () => {
  stopping = true;
  server.once("exit", () => endpoint.close(() => process.exit(0)));
  server.kill("SIGKILL");
});
