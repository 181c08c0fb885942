/**
 * Runs the git binary for the node, never for the agent: every call names its repository and work
 * tree explicitly and leaves out the configuration a user or an agent could plant. A worktree's
 * `.git` file lies inside the worktree the agent wrote; discovering the repository from it would
 * let the agent point the node's git at a directory (and a `core.fsmonitor` command) of its own.
 */
import { spawn } from "node:child_process";
import { WardenError } from "../core/errors.js";

export interface GitTarget {
  /** the repository's git directory, or a worktree's administrative directory under it */
  readonly gitDir?: string;
  readonly workTree?: string;
  /** where git runs (for commands that discover nothing) */
  readonly cwd?: string;
}

export interface GitCall extends GitTarget {
  readonly args: readonly string[];
  readonly input?: Uint8Array | string;
  /** extra environment (GIT_INDEX_FILE) */
  readonly env?: Readonly<Record<string, string>>;
  /** past this many bytes of stdout, git is killed and the call refused `git-output-too-large` */
  readonly maxOutputBytes?: number;
}

/** What a run's git commands must not pick up from any configuration: helpers that run programs. */
const SAFE_CONFIG = [
  "core.fsmonitor=false",
  "core.hooksPath=/dev/null",
  "core.quotePath=false",
  "core.autocrlf=false",
  "core.safecrlf=false",
  "gc.auto=0",
  "maintenance.auto=false",
];

function gitEnv(extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    LC_ALL: "C",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    GIT_OPTIONAL_LOCKS: "0",
    // Identity for commands that need one (none writes a commit); keeps git from reading passwd.
    GIT_AUTHOR_NAME: "warden",
    GIT_AUTHOR_EMAIL: "warden@localhost",
    GIT_COMMITTER_NAME: "warden",
    GIT_COMMITTER_EMAIL: "warden@localhost",
    ...extra,
  };
}

export function gitArgs(call: GitTarget & { readonly args: readonly string[] }): string[] {
  return [
    ...SAFE_CONFIG.flatMap((c) => ["-c", c]),
    ...(call.gitDir === undefined ? [] : [`--git-dir=${call.gitDir}`]),
    ...(call.workTree === undefined ? [] : [`--work-tree=${call.workTree}`]),
    ...call.args,
  ];
}

/** A git command that failed: its arguments and the first lines of what it said. */
export class GitError extends WardenError {
  override readonly name: string = "GitError";
  constructor(code: string, message: string, status = 500) {
    super(code, message, status);
  }
}

/** Runs git to its end; resolves with its stdout, rejects `git-failed` (or `git-unavailable`) otherwise. */
export function git(call: GitCall): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn("git", gitArgs(call), { cwd: call.cwd ?? call.workTree ?? "/", env: gitEnv(call.env), stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let errBytes = 0;
    let outBytes = 0;
    let tooLarge = false;
    child.stdout.on("data", (c: Buffer) => {
      outBytes += c.length;
      if (call.maxOutputBytes !== undefined && outBytes > call.maxOutputBytes) {
        // Held in memory whole: an output past the bound is not read on.
        if (!tooLarge) child.kill("SIGKILL");
        tooLarge = true;
        out.length = 0;
        return;
      }
      out.push(c);
    });
    child.stderr.on("data", (c: Buffer) => {
      if (errBytes < 8192) err.push(c);
      errBytes += c.length;
    });
    child.on("error", (error: NodeJS.ErrnoException) => {
      reject(new GitError("git-unavailable", `git could not be started (${error.code ?? error.message}): install git on the node`, 503));
    });
    child.on("close", (code, signal) => {
      if (tooLarge) return reject(new GitError("git-output-too-large", `git ${call.args[0] ?? ""} printed more than ${call.maxOutputBytes ?? 0} bytes`, 413));
      if (code === 0) return resolve(Buffer.concat(out));
      const said = Buffer.concat(err).toString("utf8").trim().split("\n").slice(0, 3).join("; ");
      reject(new GitError("git-failed", `git ${call.args[0] ?? ""} failed (${signal ?? `exit ${String(code)}`}): ${said}`));
    });
    child.stdin.on("error", () => undefined);
    child.stdin.end(call.input ?? "");
  });
}

/** `git cat-file --batch-check` for many objects in one process: each object's size by its id, none read. */
export async function objectSizes(gitDir: string, oids: readonly string[], env?: Readonly<Record<string, string>>): Promise<Map<string, number>> {
  const sizes = new Map<string, number>();
  const unique = [...new Set(oids)];
  if (unique.length === 0) return sizes;
  const out = await git({ gitDir, args: ["cat-file", "--batch-check"], input: unique.map((o) => `${o}\n`).join(""), ...(env === undefined ? {} : { env }) });
  const lines = out.toString("latin1").split("\n");
  unique.forEach((oid, i) => {
    const [id, type, size] = (lines[i] ?? "").split(" ");
    if (id !== oid || type === "missing" || size === undefined) throw new GitError("git-failed", `git cat-file: object ${oid} is ${type ?? "missing"}`);
    sizes.set(oid, Number(size));
  });
  return sizes;
}

/** `git cat-file --batch` for many objects in one process: each object's bytes by its id. */
export async function readObjects(gitDir: string, oids: readonly string[], env?: Readonly<Record<string, string>>): Promise<Map<string, Buffer>> {
  const objects = new Map<string, Buffer>();
  const unique = [...new Set(oids)];
  if (unique.length === 0) return objects;
  const out = await git({ gitDir, args: ["cat-file", "--batch"], input: unique.map((o) => `${o}\n`).join(""), ...(env === undefined ? {} : { env }) });
  let at = 0;
  for (const oid of unique) {
    const eol = out.indexOf(0x0a, at);
    const header = out.subarray(at, eol).toString("latin1");
    const [id, type, size] = header.split(" ");
    if (id !== oid || type === "missing" || size === undefined) throw new GitError("git-failed", `git cat-file: object ${oid} is ${type ?? "missing"}`);
    const start = eol + 1;
    const end = start + Number(size);
    objects.set(oid, out.subarray(start, end));
    at = end + 1;
  }
  return objects;
}
