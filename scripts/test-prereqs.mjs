#!/usr/bin/env node
// What the test suite needs from outside npm, installed here when missing so that `npm ci && npm
// test` is the whole set-up on a fresh machine. Everything npm ships (PostgreSQL's binaries, the
// provider CLIs, playwright-core) is a dependency in package.json instead; only what Debian alone
// has is listed here. Each entry names a command the tests run and the Debian package that brings
// it. Run by scripts/run-tests.mjs before any test; `node scripts/test-prereqs.mjs --check` only
// reports. A prerequisite that cannot be installed fails the run with the one command that would.
import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { dirname, join } from "node:path";

/**
 * `command`: absolute path, or a name looked up on PATH. `packages`: what apt-get installs for it.
 * `files`: further paths that must exist (a library package with no command of its own).
 */
/** What a node needs to confine its agents (DESIGN.md "Confinement"); also the tests'. */
export const CONFINEMENT_PREREQUISITES = [
  { why: "confined runs: every agent runs in a bubblewrap sandbox", command: "/usr/bin/bwrap", packages: ["bubblewrap"] },
];

export const DEBIAN_PREREQUISITES = [
  ...CONFINEMENT_PREREQUISITES,
  { why: "the hostile agent's ptrace(2) attempt on the node (security tests; ctypes, as node has no ptrace)", command: "/usr/bin/python3", packages: ["python3"] },
  {
    why: "attestations: securesystemslib (not warden's code) checks the node's DSSE signature with the key of /v1/keys",
    command: "/usr/bin/python3",
    packages: ["python3-securesystemslib"],
    files: ["/usr/lib/python3/dist-packages/securesystemslib/signer/_key.py"],
  },
  {
    why: "traces: Google's protobuf (not warden's code) decodes what warden exports against the official OTLP .proto files (test/fixtures/otlp-proto), compiled by protoc",
    command: "/usr/bin/protoc",
    packages: ["protobuf-compiler", "python3-protobuf"],
    files: ["/usr/lib/python3/dist-packages/google/protobuf/json_format.py"],
  },
  { why: "the console's browser tests (Playwright drives Debian's Chromium)", command: "/usr/bin/chromium", packages: ["chromium"] },
  { why: "signed bundles: signatures made and checked by the real OpenSSH", command: "ssh-keygen", packages: ["openssh-client"] },
  { why: "git workspaces: a worktree per run and its change set (DESIGN.md \"Change sets\")", command: "/usr/bin/git", packages: ["git"] },
  {
    why: "transparency log interop: Go's golang.org/x/mod/sumdb checks warden's checkpoints and proofs",
    command: "go",
    packages: ["golang-go", "golang-golang-x-mod-dev"],
    files: ["/usr/share/gocode/src/golang.org/x/mod/sumdb/tlog/tlog.go"],
  },
];

function accessible(path, mode) {
  try {
    accessSync(path, mode);
    return true;
  } catch {
    return false;
  }
}

/** Where `command` is found (the directory of its first match on PATH), or undefined. */
function whereOnPath(command) {
  if (command.includes("/")) return accessible(command, constants.X_OK) ? dirname(command) : undefined;
  return (process.env.PATH ?? "").split(":").find((dir) => dir !== "" && accessible(join(dir, command), constants.X_OK));
}

function onPath(command) {
  return whereOnPath(command) !== undefined;
}

/** The system's own directories: the shell, coreutils, util-linux (unshare, mount), bubblewrap. */
const SYSTEM_PATH = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"];

/**
 * The PATH every test process gets: the node running the tests, the prerequisites above where
 * they were found, and the system's directories, nothing else. Whatever else the machine has on
 * its PATH (version-manager shims, global CLIs, a user's bin) is not there: a test that ran one
 * would depend on this machine, and a shim can wait a minute on a lock of its own.
 */
export function testPath() {
  const dirs = [dirname(process.execPath), ...DEBIAN_PREREQUISITES.map((p) => whereOnPath(p.command)), ...SYSTEM_PATH];
  return [...new Set(dirs.filter((d) => d !== undefined))].join(":");
}

export function missingPrerequisites(list = DEBIAN_PREREQUISITES) {
  return list.filter((p) => !onPath(p.command) || (p.files ?? []).some((f) => !accessible(f, constants.F_OK)));
}

function installCommand(packages) {
  const sudo = process.getuid?.() === 0 ? "" : "sudo ";
  return `${sudo}apt-get update && ${sudo}DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${packages.join(" ")}`;
}

/** Installs what is missing; returns an error line, or undefined when everything is there. */
export function ensurePrerequisites({ checkOnly = false, log = (s) => process.stderr.write(s + "\n"), list = DEBIAN_PREREQUISITES, what = "test" } = {}) {
  const missing = missingPrerequisites(list);
  if (missing.length === 0) return undefined;
  const packages = [...new Set(missing.flatMap((p) => p.packages))];
  const command = installCommand(packages);
  if (checkOnly) return `missing ${what} prerequisites (${missing.map((p) => p.why).join("; ")}): run ${command}`;
  if (process.platform !== "linux" || !onPath("apt-get")) {
    return `missing ${what} prerequisites (${missing.map((p) => p.why).join("; ")}) and no apt-get here: install ${packages.join(", ")}`;
  }
  log(`${what} set-up: installing ${packages.join(" ")} from Debian (${missing.map((p) => p.why).join("; ")})`);
  const r = spawnSync("sh", ["-c", command], { stdio: ["ignore", "inherit", "inherit"], env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
  const still = missingPrerequisites(list);
  if (r.status !== 0 || still.length > 0) {
    return `could not install the ${what} prerequisites (${still.map((p) => p.why).join("; ") || "apt-get failed"}): run ${installCommand(packages)}`;
  }
  return undefined;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const problem = ensurePrerequisites({ checkOnly: process.argv.includes("--check") });
  if (problem !== undefined) {
    console.error(problem);
    process.exit(1);
  }
}
