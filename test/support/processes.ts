/** Whether a test's child processes (nodes, agents, their children) still run. */
import { readFileSync } from "node:fs";

/** True while `pid` runs; a zombie (dead, not yet reaped by its new parent) counts as dead. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    // Gone between the two looks.
    return false;
  }
}
