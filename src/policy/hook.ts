/** Seconds the CLI waits for the hook before it gives up on it. */
export const HOOK_TIMEOUT_S = 120;

/**
 * How long the command hook waits for the node before it blocks the call itself: well inside the
 * CLI's timeout, since Codex runs a call whose hook timed out.
 */
export const HOOK_DEADLINE_MS = (HOOK_TIMEOUT_S - 10) * 1000;

/**
 * The pre-tool hooks warden gives a governed run's CLI (DESIGN.md "Governed tool calls"). Both
 * reach the run's decision endpoint (gate.ts), which decides, journals, and answers with the CLI's
 * own hook output; the hook decides nothing itself and knows no policy, and the endpoint it reaches
 * is its own run's (one per run), so it cannot speak for another run.
 *
 * - Claude Code gets an HTTP hook (`type: "http"`, Claude Code 2.1.328): the CLI POSTs the hook input
 *   itself, so no process starts per tool call. Confined, the URL is the sandbox bridge's decision
 *   port (sandbox/bridge.ts), which carries the connection to the run's socket; unconfined, the
 *   gate's loopback port with the run's token in a header. `onFailure: "block"` makes a failed
 *   request (unreachable, timed out, not a 2xx, a body that is not JSON) block the call: without it
 *   Claude Code lets the call run.
 * - Codex (0.171) has command hooks only: a few lines of Node, `node -e <source> <socket> <deadline>`,
 *   so no file of warden needs to be visible inside the sandbox. It POSTs its stdin over the run's
 *   socket and prints the answer. Codex has no `onFailure` and runs the call on any other exit than
 *   2, on output it cannot read and on a hook timeout, so the hook fails closed itself: anything but
 *   a whole 200 that is empty (allow) or a denial with a reason (no socket, a cut or garbage reply,
 *   no answer by its deadline, an exception) is exit code 2 with the reason on stderr, which the CLI
 *   reads as "blocked" and shows the model.
 *
 * An allowed call gets an empty answer: the CLI's own permission mode still applies (a policy
 * narrows what a run may do, it never widens its permission mode). A denied one gets
 * `{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
 * "permissionDecisionReason": <reason>}}` (Claude Code 2.1.328's hook protocol, which codex-cli
 * 0.171 reads alike; it refuses a denial with an empty reason, so there always is one). A Claude
 * call that waits for an operator gets `permissionDecision: "defer"`: in `-p` mode Claude Code then
 * ends its turn without running the call (its result line says `stop_reason: "tool_deferred"`),
 * and `--resume` of the session asks the hook about the same call again.
 */
export const HOOK_SOURCE = String.raw`
"use strict";
// Codex runs the call on any exit but 2 (or a deny printed on exit 0), on output it cannot read,
// and when the hook outlives its timeout: every way out of here but a decision read whole is exit 2.
let done = false;
const fail = (message) => {
  if (done) return;
  done = true;
  try { process.stderr.write("warden: " + message + ", so the call is not allowed\n"); } catch {}
  process.exit(2);
};
const finish = (output) => {
  if (done) return;
  done = true;
  if (output === "") process.exit(0);
  process.stdout.write(output, () => process.exit(0));
};
process.on("uncaughtException", (error) => fail("the hook failed (" + (error && error.message) + ")"));
try {
  const http = require("node:http");
  const socket = process.argv[1];
  const deadline = Number(process.argv[2]);
  setTimeout(() => fail("the node's policy decision point did not answer in time"), deadline > 0 ? deadline : ${HOOK_DEADLINE_MS});
  const input = [];
  process.stdin.on("data", (chunk) => input.push(chunk));
  process.stdin.on("error", () => fail("the tool call could not be read"));
  process.stdin.on("end", () => {
    const req = http.request({ socketPath: socket, method: "POST", path: "/v1/decide", headers: { "content-type": "application/json" } }, (res) => {
      const reply = [];
      res.on("data", (chunk) => reply.push(chunk));
      res.on("error", () => fail("the node's policy decision point gave no answer"));
      res.on("aborted", () => fail("the node's policy decision point gave no answer"));
      res.on("end", () => {
        if (res.statusCode !== 200) return fail("the node's policy decision point refused the request (" + res.statusCode + ")");
        if (!res.complete) return fail("the node's policy decision point's answer was cut short");
        const text = Buffer.concat(reply).toString("utf8");
        // An allow is an empty answer; anything else must be a denial with its reason, printed as read.
        if (text === "") return finish("");
        let out;
        try { out = JSON.parse(text).hookSpecificOutput; } catch { out = undefined; }
        if (out === null || typeof out !== "object" || out.permissionDecision !== "deny" || typeof out.permissionDecisionReason !== "string" || out.permissionDecisionReason === "")
          return fail("the node's policy decision point answered something that is not a decision");
        finish(JSON.stringify({ hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: out.permissionDecisionReason } }));
      });
    });
    req.on("error", (error) => fail("the node's policy decision point cannot be reached (" + error.code + ")"));
    req.end(Buffer.concat(input));
  });
} catch (error) {
  fail("the hook failed (" + (error && error.message) + ")");
}
`;

/** The gate's answer to one call. */
export interface HookAnswer {
  readonly decision: "allow" | "deny" | "defer";
  readonly reason?: string;
}

/** The CLI's hook output for an answer: empty for allow (no output: the CLI's permission mode applies). */
export function hookOutput(answer: HookAnswer): string {
  if (answer.decision === "allow") return "";
  const reason = typeof answer.reason === "string" && answer.reason !== "" ? answer.reason : "warden policy: the call is not allowed";
  return JSON.stringify({ hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: answer.decision, permissionDecisionReason: reason } });
}


/** A word for a POSIX shell, quoted. */
function shellWord(value: string): string {
  return `'${value.split("'").join(`'\\''`)}'`;
}

/** The hook's command line (the CLI runs a command hook with a shell); `deadlineMs` as HOOK_DEADLINE_MS. */
export function hookCommand(node: string, socket: string, deadlineMs: number = HOOK_DEADLINE_MS): string {
  return [node, "-e", HOOK_SOURCE, socket, String(deadlineMs)].map(shellWord).join(" ");
}

/** Where Claude Code's HTTP hook reaches the run's decision endpoint, and the headers it sends. */
export interface HttpHook {
  readonly url: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * Claude Code settings entries that ask the decision endpoint before every tool call (Claude Code
 * 2.1.328: `{type: "http", url, headers, timeout, onFailure}`; the body is the hook input, the
 * response body the hook output). `onFailure: "block"`: a hook that cannot reach the node blocks
 * the call; Claude Code's default would run it.
 */
export function claudeHookSettings(hook: HttpHook): Record<string, unknown> {
  return {
    PreToolUse: [{ matcher: "*", hooks: [{ type: "http", url: hook.url, ...(hook.headers === undefined ? {} : { headers: { ...hook.headers } }), timeout: HOOK_TIMEOUT_S, onFailure: "block" }] }],
  };
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
