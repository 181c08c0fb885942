/**
 * Which node a command talks to (DESIGN.md "HTTP API v1" auth, "CLI"): `--url` or `$WARDEN_URL`
 * names a node, with `$WARDEN_TOKEN` as its token; otherwise the local node of the state
 * directory (`--home`, `$WARDEN_HOME`, `./.warden`) is found through the `node.json` that
 * `warden serve` writes there, and its operator token is read from `<home>/token` — which is sent
 * to that node only, also when `--url` names it, never to any other URL.
 */
import { join } from "node:path";
import type { Command } from "commander";
import { ValidationError, errnoCode } from "../core/errors.js";
import { readPrivateFileSync } from "../storage/secure-fs.js";
import { HOME_LOCK_FILE } from "../warden/home-files.js";
import type { WardenClient } from "../client/client.js";
import { resolveHome, type CliIo } from "./context.js";

export interface NodeFlags {
  readonly url?: string;
  readonly home?: string;
}

export interface NodeTarget {
  readonly url: string;
  readonly token: string | undefined;
  /** where the URL came from, for messages */
  readonly source: string;
}

const NODE_FILE = "node.json";
const TOKEN_FILE = "token";
const SMALL_FILE_BYTES = 64 * 1024;

/** Adds the options every command that talks to a node takes. */
export function nodeOptions(command: Command): Command {
  return command
    .option("--url <url>", "node URL (default $WARDEN_URL, else the local node of --home)")
    .option("--home <dir>", "state directory of the local node (default $WARDEN_HOME or ./.warden)");
}

/** Reads a small private file of the state directory, or undefined when it does not exist. */
function readStateFile(path: string): string | undefined {
  try {
    return readPrivateFileSync(path, SMALL_FILE_BYTES).toString("utf8");
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return undefined;
    throw error;
  }
}

/** The URL in `<home>/node.json`, or undefined when no local node has published one. */
function publishedUrl(home: string): string | undefined {
  const path = join(home, NODE_FILE);
  const text = readStateFile(path);
  if (text === undefined) return undefined;
  let url: unknown;
  try {
    url = (JSON.parse(text) as { url?: unknown }).url;
  } catch {
    url = undefined;
  }
  if (typeof url !== "string" || url === "") throw new ValidationError("node-file-invalid", `${path} holds no node URL`);
  return url;
}

function publishedUrlOrNone(home: string): string | undefined {
  try {
    return publishedUrl(home);
  } catch {
    return undefined;
  }
}

function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return false;
  }
}

export async function resolveNode(io: CliIo, flags: NodeFlags): Promise<NodeTarget> {
  const home = resolveHome(io, flags.home);
  const remote = nonEmpty(flags.url) ?? nonEmpty(io.env.WARDEN_URL);
  // Without a URL the local node is the target; with one, it is only asked whether it is the local node.
  const local = remote === undefined ? publishedUrl(home) : nonEmpty(io.env.WARDEN_TOKEN) === undefined ? publishedUrlOrNone(home) : undefined;
  const url = remote ?? local;
  if (url === undefined) {
    throw new ValidationError("node-not-found", `no local node: ${join(home, NODE_FILE)} does not exist (start one with \`warden serve\`, or set WARDEN_URL)`);
  }
  const source = flags.url !== undefined ? "--url" : remote !== undefined ? "WARDEN_URL" : join(home, NODE_FILE);
  let protocol: string;
  try {
    protocol = new URL(url).protocol;
  } catch {
    throw new ValidationError("node-url-invalid", `${source}: ${JSON.stringify(url)} is not a URL`);
  }
  if (protocol !== "http:" && protocol !== "https:") throw new ValidationError("node-url-invalid", `${source}: ${JSON.stringify(url)} is not an http(s) URL`);
  // The local operator token goes only to the local node: never to another URL.
  const ownNode = local !== undefined && sameOrigin(url, local);
  // node.json's URL is only the node's while a node serves the home; no token goes to it otherwise.
  if (ownNode) await checkNodeServes(home, url);
  const token = nonEmpty(io.env.WARDEN_TOKEN) ?? (ownNode ? readStateFile(join(home, TOKEN_FILE))?.trim() : undefined);
  return { url, token: token === "" ? undefined : token, source };
}

/**
 * A node killed with -9 (or crashed) leaves its node.json behind, and any local user may listen on
 * the loopback port it names once it is free: the home's token goes there only while a node
 * holds the home (it holds its lock for its whole life), never on the file's word alone.
 */
async function checkNodeServes(home: string, url: string): Promise<void> {
  // Loaded here: the lock is a native addon that only a command talking to a local node needs.
  const { FileLock } = await import("../storage/lock.js");
  if (!FileLock.isFree(join(home, HOME_LOCK_FILE))) return;
  throw new ValidationError(
    "node-not-running",
    `${join(home, NODE_FILE)} names ${url}, but no node serves ${home} (it was stopped or crashed); start it with \`warden serve\``,
  );
}

/** The client of the node `flags` name; the client is loaded here, so that registering a command costs nothing. */
export async function connect(io: CliIo, flags: NodeFlags): Promise<WardenClient> {
  const target = await resolveNode(io, flags);
  const { WardenClient } = await import("../client/client.js");
  return new WardenClient({ url: target.url, ...(target.token !== undefined ? { token: target.token } : {}) });
}

export function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}
