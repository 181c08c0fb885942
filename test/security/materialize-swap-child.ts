/**
 * The attacker of materialize-swap.test.ts: a process of the node's user (a leftover of an agent)
 * that watches the materializations root and, in each materialization's temp directory, swaps
 * `bundle/` for a symlink to a victim directory (the real one is renamed beside it, inside the
 * root). Odd temps are swapped at first sight of `bundle/` (while warden creates directories),
 * even ones once `bundle/skills/review/` exists (while it writes files). Prints how many swaps it
 * made when its stdin closes.
 */
import * as fs from "node:fs";
import * as path from "node:path";

const [root, victim] = process.argv.slice(2) as [string, string];
let swaps = 0;
let seen = 0;
let stop = false;
const done = new Set<string>();
process.stdin.on("end", () => {
  stop = true;
});
process.stdin.resume();

function trySwap(temp: string, late: boolean): boolean {
  const bundle = path.join(temp, "bundle");
  try {
    if (!fs.lstatSync(late ? path.join(bundle, "skills", "review") : bundle).isDirectory()) return false;
    fs.renameSync(bundle, `${bundle}.moved`);
    fs.symlinkSync(victim, bundle);
    swaps++;
  } catch {
    // Not there yet, or gone (the run failed or finished): nothing to swap.
    return false;
  }
  return true;
}

function tick(): void {
  for (let i = 0; i < 500 && !stop; i++) {
    let names: string[];
    try {
      names = fs.readdirSync(root);
    } catch {
      continue;
    }
    for (const name of names) {
      if (!name.startsWith(".tmp-") || done.has(name)) continue;
      const late = seen % 2 === 0;
      if (trySwap(path.join(root, name), late)) {
        done.add(name);
        seen++;
      }
    }
  }
  if (stop) {
    process.stdout.write(`${swaps}\n`);
    process.exit(0);
  }
  setImmediate(tick);
}

process.stdout.write("ready\n");
tick();
