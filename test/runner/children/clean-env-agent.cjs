// An agent that starts a child with an EMPTY environment (as `env -i`, or an MCP server given an
// explicit env, would: no agent tag), prints the child's pid, then runs until killed — or, with
// argv[2] = "leader-exits", exits as soon as the process that started it is gone.
const { spawn } = require("node:child_process");

// Before anything is reported: once the pid is out, the test may kill the parent at any moment.
const parent = process.ppid;
const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1 << 30)"], { env: {}, stdio: "ignore" });
process.stdout.write(`${child.pid}\n`);
const exits = process.argv[2] === "leader-exits";
setInterval(() => {
  if (exits && process.ppid !== parent) process.exit(0);
}, 20);
