/**
 * What an agent wrote reaches the operator's terminal made visible: an escape sequence in its
 * answer (OSC 52 sets the clipboard), a carriage return that would overwrite a line, a
 * bidirectional override, never act on the terminal; to a pipe the same text goes byte for byte.
 * `processIo` tells a terminal from a pipe by stdout itself, checked under a real pseudo-terminal
 * (`script`, util-linux).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { shownText } from "../../src/cli/terminal-text.js";
import { printInvocation } from "../../src/cli/invocation-view.js";
import type { CliContext } from "../../src/cli/context.js";
import type { InvocationView } from "../../src/client/wire.js";
import { repo } from "../support/node.js";

const HOSTILE = "done\u001b]52;c;ZXZpbA==\u0007 \u001b[8mhidden\u001b[0m\rover \u202egnp.exe\u009b2J\ttab";

function captured(terminal: boolean): { ctx: CliContext; out: () => string } {
  let out = "";
  const ctx: CliContext = { io: { stdout: (t) => void (out += t), stderr: (t) => void (out += t), env: {}, cwd: "/", terminal }, exitCode: 0 };
  return { ctx, out: () => out };
}

describe("an agent's text on the operator's terminal", () => {
  it("control characters, C1 controls and bidirectional overrides are shown as stand-ins; tab and newline stay", () => {
    assert.equal(
      shownText(HOSTILE, true),
      "done\u241b]52;c;ZXZpbA==\u2407 \u241b[8mhidden\u241b[0m\u240dover \\u{202e}gnp.exe\\u{9b}2J\ttab",
    );
    assert.equal(shownText("a\nb\tc ü 😀\n", true), "a\nb\tc ü 😀\n");
    assert.equal(shownText(HOSTILE, false), HOSTILE, "to a pipe, byte for byte");
  });

  it("warden invoke prints an answer and a result with no character that acts on a terminal", () => {
    const view = { status: "recorded", scope: "api:operator", id: "6f1c7c53-7d1a-4b7f-9a55-0c3f7b3f2a11", run_id: "0b8f5d7e-0000-4000-8000-000000000000", result: { exit_code: 0, output_sha256: "sha256:00", answer: HOSTILE, error: { code: "agent-reported-error", message: "\u001b]8;;http://x\u0007click\u001b]8;;\u0007" } } } as unknown as InvocationView;
    const onTerminal = captured(true);
    printInvocation(onTerminal.ctx, view);
    // eslint-disable-next-line no-control-regex
    assert.doesNotMatch(onTerminal.out(), /[\u001b\u0007\u009b\u202e\r]/);
    assert.match(onTerminal.out(), /answer:\ndone\u241b\]52;c;ZXZpbA==\u2407/);
    const onPipe = captured(false);
    printInvocation(onPipe.ctx, view);
    assert.ok(onPipe.out().includes(HOSTILE), "piped, the answer is the agent's own bytes");
  });

  it("processIo takes stdout for a terminal only when it is one (a real pseudo-terminal through script)", { skip: fs.existsSync("/usr/bin/script") ? false : "script (util-linux) is not installed" }, () => {
    const probe = `const { processIo } = await import(${JSON.stringify(pathToFileURL(path.join(repo, "src", "cli", "context.ts")).href)}); console.log("terminal=" + processIo().terminal);`;
    const args = [process.execPath, "--import", "tsx", "--input-type=module", "-e", probe];
    const piped = spawnSync(args[0]!, args.slice(1), { encoding: "utf8", cwd: repo });
    assert.match(piped.stdout, /terminal=false/, piped.stderr);
    const quoted = args.map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
    const onTty = spawnSync("/usr/bin/script", ["-qec", quoted, "/dev/null"], { encoding: "utf8", cwd: repo });
    assert.match(onTty.stdout, /terminal=true/, onTty.stderr);
  });
});
