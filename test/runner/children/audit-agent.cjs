// Fixture agent for the crash and process audit (audit-*.test.ts), run through a shell wrapper as
// `<wrapper> --print -p <prompt>`. Words of the prompt choose how it misbehaves; every pid it
// starts is written to <dir>/pids (one line each: the pid and its start time) so the test can check
// on them and kill them, but not a later process that got the same pid; <dir> is the directory of
// $WARDEN_FIXTURE_STARTS. Grandchildren live at most LIFE_MS, so a test that fails cannot leave
// them running for long.
"use strict";
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");
const { startTicksOf } = require("../../fixtures/agents/proc-start.cjs");

const LIFE_MS = 30_000;
// The prompt is the last argument (after `--`, or kimi's `-p`): profiles.ts expandLaunchArgs.
const prompt = process.argv.at(-1) ?? "";
const words = new Set(prompt.split(/\s+/));
const dir = path.dirname(process.env.WARDEN_FIXTURE_STARTS ?? "/nonexistent/x");
const note = (pid) => fs.appendFileSync(path.join(dir, "pids"), `${pid} ${startTicksOf(pid) ?? "-"}\n`);
note(process.pid);

/** A grandchild that ticks a counter file (its effects) until killed or LIFE_MS passed. */
function grandchild(options) {
  const effects = path.join(dir, "effects");
  const code = `const fs=require("node:fs");const end=Date.now()+${LIFE_MS};` +
    `setInterval(()=>{fs.appendFileSync(${JSON.stringify(effects)},"x");if(Date.now()>end)process.exit(0)},50);`;
  const child = spawn(process.execPath, ["-e", code], options);
  note(child.pid);
  child.unref();
  return child;
}

if (words.has("escape-holding")) {
  // setsid, its own group and session, still holding the agent's stdout and stderr.
  grandchild({ detached: true, stdio: ["ignore", "inherit", "inherit"] });
  process.stdout.write("left a detached helper behind\n");
  process.exit(0);
}
if (words.has("escape-quiet")) {
  // setsid, its own group and session, output to /dev/null (a daemon done right).
  grandchild({ detached: true, stdio: "ignore" });
  process.stdout.write("left a daemon behind\n");
  process.exit(0);
}
if (words.has("escape-clean-holding")) {
  // setsid with an empty environment (no run tag to find it by), still holding stdout and stderr.
  grandchild({ detached: true, stdio: ["ignore", "inherit", "inherit"], env: {} });
  process.stdout.write("left an untagged helper behind\n");
  process.exit(0);
}
if (words.has("group-holding")) {
  // Same process group: warden's kill of the group on exit reaches it.
  grandchild({ stdio: ["ignore", "inherit", "inherit"] });
  process.stdout.write("left a child behind\n");
  process.exit(0);
}
if (words.has("hang-with-escapee")) {
  // Keeps running, with a setsid daemon beside it: both go on after their node is killed. Its
  // output first: the test kills the node once the daemon's pid is noted, and a write to a pipe
  // whose reader is gone is EPIPE, which ends a Node process (the agent would not run on).
  process.stdout.write("working\n");
  grandchild({ detached: true, stdio: "ignore" });
  setInterval(() => undefined, 1000);
}
if (words.has("hang-with-holding-escapee")) {
  // Keeps running, with a setsid helper holding its stdout: killing the agent's group leaves it.
  process.stdout.write("working\n");
  grandchild({ detached: true, stdio: ["ignore", "inherit", "inherit"] });
  setInterval(() => undefined, 1000);
}
if (words.has("binary")) {
  // NUL, invalid UTF-8, a lone surrogate's bytes and a character cut at the very end.
  process.stdout.write(Buffer.from([0x6f, 0x6b, 0x00, 0xff, 0xfe, 0x0a, 0xed, 0xa0, 0x80, 0x0a, 0xe2, 0x82]));
  process.exit(0);
}
const longLine = [...words].find((w) => w.startsWith("long-tool-line="));
if (longLine !== undefined) {
  // A claude tool call whose one event line is longer than any bound (a big file written), then a
  // small tool call that starts and finishes: the first cannot be read, the second can.
  const big = "a".repeat(Number(longLine.slice(15)) * 1024 * 1024);
  const use = (id, input) => JSON.stringify({ type: "assistant", message: { content: [{ type: "tool_use", id, name: "Write", input }] } });
  const result = (id) => JSON.stringify({ type: "user", message: { content: [{ type: "tool_result", tool_use_id: id }] } });
  process.stdout.write(`${use("big", { content: big })}\n${use("small", { path: "x" })}\n${result("small")}\n`, () => process.exit(0));
  return;
}
const flood = [...words].find((w) => w.startsWith("flood="));
if (words.has("fill-disk")) {
  // Fills the file system of its working directory (the workspace, on the node's disk) until it
  // refuses, then prints 1 MiB, which the node's capture of its output meets the full disk with.
  const fd = fs.openSync("fill", "w");
  const block = Buffer.alloc(64 * 1024);
  let filled = 0;
  try {
    for (;;) filled += fs.writeSync(fd, block);
  } catch (error) {
    if (error.code !== "ENOSPC") throw error;
  }
  fs.closeSync(fd);
  process.stdout.write(`filled ${filled}\n${"x".repeat(1024 * 1024)}\n`, () => process.exit(0));
} else if (words.has("fill-inodes")) {
  // Takes every free inode of its working directory's file system, one empty file each.
  fs.mkdirSync("inodes");
  let made = 0;
  try {
    for (;;) fs.closeSync(fs.openSync(path.join("inodes", String(made++)), "w"));
  } catch (error) {
    if (error.code !== "ENOSPC") throw error;
  }
  process.stdout.write(`made ${made - 1}\n`, () => process.exit(0));
} else if (flood !== undefined) {
  const mib = Number(flood.slice(6));
  const chunk = Buffer.alloc(1024 * 1024, 0x61);
  let left = mib;
  const more = () => {
    while (left > 0) {
      left--;
      if (!process.stdout.write(chunk)) return process.stdout.once("drain", more);
    }
    process.exit(0);
  };
  more();
} else if (words.has("ignore-term")) {
  process.on("SIGTERM", () => process.stdout.write("ignoring SIGTERM\n"));
  setInterval(() => undefined, 1000);
} else if (words.has("hang")) {
  setInterval(() => undefined, 1000);
} else if (words.has("crash-signal")) {
  process.kill(process.pid, "SIGKILL");
} else if (words.has("exit-now")) {
  process.exit(Number([...words].find((w) => /^[0-9]+$/.test(w)) ?? 0));
}
