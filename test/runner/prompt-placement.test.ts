/**
 * A prompt is never read as an option or a subcommand (issue 27: `invoke --provider codex -- review`
 * ran `codex exec review`). The fixture agents parse their argv as the real CLIs do (claude and
 * codex: `--` ends the options, `--help` and exec's subcommands before it are taken; kimi: `-p`
 * takes the next argument whatever it is); test/agents/ runs the real pinned claude and codex.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { randomUUID } from "node:crypto";

import { SCOPE, killStarts, openRunnerEnv, starts, type RunnerEnv } from "./helpers.js";
import { tempDir } from "../support/temp.js";

const PROMPTS = ["review", "--help", "-m x", "resume", "-p", "--dangerously-skip-permissions"];

describe("a prompt that looks like an option or a subcommand", () => {
  let root: string;
  let env: RunnerEnv;

  before(async () => {
    root = tempDir("prompt-placement");
    env = await openRunnerEnv(root);
  });
  after(async () => {
    killStarts(env.startsFile);
    await env.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  for (const provider of ["claude", "codex", "kimi"] as const) {
    it(`${provider}: reaches the agent as its prompt, after every option`, async () => {
      for (const prompt of PROMPTS) {
        const outcome = await env.runner.invoke({ scope: SCOPE, id: randomUUID(), request: { provider, prompt } });
        assert.equal(outcome.status, "recorded", `${provider} ${JSON.stringify(prompt)}: ${JSON.stringify(outcome)}`);
        const result = (outcome as unknown as { result: { exit_code: number; answer?: string; output_tail: string; error?: unknown } }).result;
        assert.equal(result.exit_code, 0, `${provider} ${JSON.stringify(prompt)}: ${JSON.stringify(result)}`);
        assert.equal(result.error, undefined, JSON.stringify(result));
        const argv = starts(env.startsFile).at(-1)!.argv;
        assert.equal(argv.at(-1), prompt, JSON.stringify(argv));
        // The agent answered the prompt: it did not print its help or run a subcommand.
        if (provider === "kimi") assert.ok(result.output_tail.endsWith(`Answer to: ${prompt}\n`), result.output_tail);
        else assert.ok(typeof result.answer === "string" && result.answer !== "", JSON.stringify(result));
      }
    });
  }
});
