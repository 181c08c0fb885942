/**
 * The pre-tool hook warden gives a governed run's CLI (DESIGN.md "Governed tool calls"). It is the
 * CLI's own hook mechanism (Claude Code's and Codex's `PreToolUse` command hook) running a few lines of Node:
 * it passes the hook's input, as the CLI wrote it on stdin, to the run's decision socket and turns
 * the node's answer into the CLI's hook output. It decides nothing itself and knows no policy:
 * the node decides and journals, and the socket it reaches is its own run's (one socket per run,
 * bound only into that run's sandbox), so it cannot speak for another run.
 *
 * It is given as `node -e <source> <socket>`, so no file of warden needs to be visible inside
 * the sandbox (as the egress bridge, sandbox/bridge.ts). Anything but an answer (no socket, no
 * reply, a reply that is not JSON) blocks the call: exit code 2 with the reason on stderr, which
 * both CLIs read as "blocked" and show the model.
 *
 * An allowed call gets no output: the CLI's own permission mode still applies (a policy narrows
 * what a run may do, it never widens its permission mode). A denied one gets
 * `{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
 * "permissionDecisionReason": <reason>}}` (Claude Code 2.1.328's hook protocol, which codex-cli
 * 0.171 reads alike; it refuses a denial with an empty reason, so there always is one).
 */
export const HOOK_SOURCE = String.raw`
"use strict";
const net = require("node:net");
const socket = process.argv[1];
const fail = (message) => { process.stderr.write("warden: " + message + "\n"); process.exit(2); };
const input = [];
process.stdin.on("data", (chunk) => input.push(chunk));
process.stdin.on("error", () => fail("the tool call could not be read, so it is not allowed"));
process.stdin.on("end", () => {
  const reply = [];
  const conn = net.connect({ path: socket });
  conn.on("data", (chunk) => reply.push(chunk));
  conn.on("error", (error) => fail("the node's policy decision point cannot be reached (" + error.code + "), so the call is not allowed"));
  conn.on("end", () => {
    let answer;
    try { answer = JSON.parse(Buffer.concat(reply).toString("utf8")); } catch { return fail("the node's policy decision point gave no answer, so the call is not allowed"); }
    if (answer === null || typeof answer !== "object") return fail("the node's policy decision point gave no answer, so the call is not allowed");
    if (answer.decision === "allow") process.exit(0);
    process.stdout.write(JSON.stringify({ hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: typeof answer.reason === "string" && answer.reason !== "" ? answer.reason : "warden policy: the call is not allowed" } }));
    process.exit(0);
  });
  conn.end(Buffer.concat(input));
});
`;

/** Seconds the CLI waits for the hook before it gives up on it. */
export const HOOK_TIMEOUT_S = 120;

/** A word for a POSIX shell, quoted. */
function shellWord(value: string): string {
  return `'${value.split("'").join(`'\\''`)}'`;
}

/** The hook's command line (Claude Code runs a command hook with a shell). */
export function hookCommand(node: string, socket: string): string {
  return [node, "-e", HOOK_SOURCE, socket].map(shellWord).join(" ");
}

/** Claude Code settings entries that run the hook before every tool call. */
export function claudeHookSettings(command: string): Record<string, unknown> {
  return { PreToolUse: [{ matcher: "*", hooks: [{ type: "command", command, timeout: HOOK_TIMEOUT_S }] }] };
}

/**
 * The `[hooks]` table of a run's CODEX_HOME/config.toml that runs the hook before every tool call
 * (codex-cli 0.171: `[[hooks.PreToolUse]]` groups of `{matcher, hooks: [{type, command, timeout}]}`,
 * the command run by a shell). Codex runs a hook of its user layer only once trusted by its hash, or
 * under `--dangerously-bypass-hook-trust` (CODEX_HOOK_TRUST_ARGS), which a governed run is given.
 */
export function codexHookConfig(command: string): Record<string, unknown> {
  return { PreToolUse: [{ matcher: "*", hooks: [{ type: "command", command, timeout: HOOK_TIMEOUT_S }] }] };
}

/** Codex's arguments that let warden's own hook run without an interactive trust review. */
export const CODEX_HOOK_TRUST_ARGS: readonly string[] = Object.freeze(["--dangerously-bypass-hook-trust"]);
