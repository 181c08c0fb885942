/**
 * The program that runs first inside the sandbox: it listens on the sandbox's own loopback (the
 * sandbox has no other network) and carries every connection made to it, byte for byte, to the
 * node's egress proxy through the unix socket bound into the sandbox; a governed run's bridge
 * carries a second port, alike, to the run's decision socket, so Claude Code's HTTP pre-tool hook
 * reaches the node with no process started per call (policy/hook.ts). Then it starts the agent
 * with the proxy variables pointing at it, and ends as the agent ends. It is Node because the
 * provider CLIs are: the binary is already mounted, and nothing else needs to be. It is passed as
 * `node -e <source>` so no file of warden has to be visible inside.
 *
 * When the agent is killed by a signal, the bridge writes the signal's name to the status file
 * (bound read-write into the sandbox) before dying of it: bubblewrap reports a signal as the exit
 * code 128 + its number, and the runner must tell a killed agent (its run unresolved) from one
 * that exited with that code.
 *
 * argv: <port> <socket> <status file> <decision host:port> <decision socket, or "-"> <command> <args…>
 */
export const BRIDGE_SOURCE = String.raw`
"use strict";
const net = require("node:net");
const { spawn } = require("node:child_process");
const [port, socket, status, decisionAt, decisionSocket, command, ...args] = process.argv.slice(1);
const forward = (path) => net.createServer({ allowHalfOpen: true }, (inside) => {
  const outside = net.connect({ path, allowHalfOpen: true });
  const drop = () => { inside.destroy(); outside.destroy(); };
  inside.on("error", drop);
  outside.on("error", drop);
  inside.on("close", drop);
  outside.on("close", drop);
  inside.pipe(outside);
  outside.pipe(inside);
});
const listen = (server, host, port) => new Promise((resolve) => {
  server.on("error", (error) => {
    process.stderr.write("warden sandbox: the bridge cannot listen: " + error.message + "\n");
    process.exit(125);
  });
  server.listen(Number(port), host, resolve);
});
const ready = [listen(forward(socket), "127.0.0.1", port)];
if (decisionSocket !== "-") ready.push(listen(forward(decisionSocket), decisionAt.split(":")[0], decisionAt.split(":")[1]));
Promise.all(ready).then(() => {
  const agent = spawn(command, args, { stdio: "inherit" });
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(signal, () => agent.kill(signal));
  agent.on("error", (error) => {
    process.stderr.write("warden sandbox: " + command + ": " + error.message + "\n");
    process.exit(error.code === "ENOENT" ? 127 : 126);
  });
  agent.on("exit", (code, signal) => {
    if (signal === null) process.exit(code === null ? 1 : code);
    for (const s of ["SIGTERM", "SIGINT", "SIGHUP"]) process.removeAllListeners(s);
    try { require("node:fs").writeFileSync(status, signal); } catch {}
    process.kill(process.pid, signal);
  });
});
`;
