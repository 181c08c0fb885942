/**
 * What the real-agent tests under a tool policy share: a git repository with a bare remote the
 * agent may try to push to, and a run's tool calls read back from its journal.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ScriptTurn } from "../../src/scripted-model/index.js";

/** A journal line as these tests read it. */
export interface PolicyEntry {
  entry: { seq: number; event: { type: string; effect_id?: string; call_id?: string; kind?: string; name?: string; decision?: string; policies?: string[]; reason?: string; outcome?: string; detail?: Record<string, unknown>; policy?: { digest: string } } };
}

/** git with no system or user configuration but what `home` holds. */
export const gitIn =
  (home: string) =>
  (cwd: string, ...args: string[]): string =>
    execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: home } }).trim();

/** A clone (`work`) with one commit and its bare remote (`remote.git`), both inside the workspace: the sandbox sees only that. */
export function makeRepository(git: ReturnType<typeof gitIn>, workspace: string): void {
  mkdirSync(workspace, { recursive: true });
  git(workspace, "init", "-q", "--bare", "-b", "main", "remote.git");
  git(workspace, "init", "-q", "-b", "main", "work");
  const work = join(workspace, "work");
  git(work, "config", "user.email", "agent@example.invalid");
  git(work, "config", "user.name", "agent");
  writeFileSync(join(work, "README.md"), "# project\n");
  git(work, "add", "README.md");
  git(work, "commit", "-q", "-m", "first");
  git(work, "remote", "add", "origin", join(workspace, "remote.git"));
}

/** The remote's `main`, or "" while nothing was pushed to it. */
export const remoteHeadOf = (git: ReturnType<typeof gitIn>, workspace: string): string =>
  git(workspace, "--git-dir", join(workspace, "remote.git"), "for-each-ref", "--format=%(objectname)", "refs/heads/main");

export interface ToolCall<E extends PolicyEntry> {
  id: string;
  decision?: E["entry"];
  started?: E["entry"];
  finished?: E["entry"];
}

/** Each tool call's decision and effect, by the call id both carry. */
export function toolCalls<E extends PolicyEntry>(entries: E[]): ToolCall<E>[] {
  const ids = [...new Set(entries.flatMap((e) => (e.entry.event.type === "policy.decision" ? [e.entry.event.call_id!] : e.entry.event.kind === "tool" ? [e.entry.event.effect_id!] : [])))];
  return ids.map((id) => ({
    id,
    decision: entries.find((e) => e.entry.event.type === "policy.decision" && e.entry.event.call_id === id)?.entry,
    started: entries.find((e) => e.entry.event.type === "effect.started" && e.entry.event.effect_id === id)?.entry,
    finished: entries.find((e) => e.entry.event.type === "effect.finished" && e.entry.event.effect_id === id)?.entry,
  }));
}

/** The reason the ask tests' policy gives for holding `rm -rf` for a human. */
export const ASK_REASON = "deleting a tree needs a human";

/** The ask tests' policy: `rm -rf` asks, an operator's every other call is permitted. */
export const ASK_POLICY = `@id("ask-rm")
@ask
@reason("${ASK_REASON}")
forbid(principal, action == Action::"shell", resource) when { resource.command like "*rm -rf*" };

@id("operators")
permit(principal, action, resource) when { principal.role == "operator" };
`;

/** The scripted model's turn that has Claude Code run `command` with its Bash tool. */
export const bash = (command: string): ScriptTurn => ({ tool: { name: "Bash", input: { command, description: "run a command" } } });

/** The ask tests' script: remove `build/`, then say so. */
export const ASK_SCRIPT: ScriptTurn[] = [bash("rm -rf build/"), { text: "Removed build/." }];

/** The environment variable the scripted model's (fake) API key travels in. */
export const SCRIPTED_KEY_VAR = "SCRIPTED_MODEL_KEY";

/**
 * A provider entry running the pinned CLI at `cli` against the scripted model at `modelUrl`
 * (Codex speaks the OpenAI API under `/v1`).
 */
export function scriptedProvider(cli: string, modelUrl: string): { command: string; model: { baseUrl: string; apiKeyEnv: string; name: string; retries: number } } {
  return { command: cli, model: { baseUrl: modelUrl, apiKeyEnv: SCRIPTED_KEY_VAR, name: "scripted-model", retries: 1 } };
}

/** A real-agent test node's environment: its operator token, the model's key, and a HOME of its own under `root`. */
export function scriptedNodeEnv(root: string, token: string): Record<string, string> {
  return { WARDEN_TOKEN: token, [SCRIPTED_KEY_VAR]: "sk-scripted-not-a-secret", HOME: join(root, "agent-home") };
}
