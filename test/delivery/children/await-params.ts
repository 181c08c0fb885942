/** The child's side of warm-child.ts: reads its parameters from stdin once it is loaded. */
import { createInterface } from "node:readline";

/** The child's side: prints `loaded`, then runs `run` with the parameters line from stdin. */
export function awaitParams<P>(run: (params: P) => Promise<void>): void {
  const lines = createInterface({ input: process.stdin });
  lines.once("line", (line) => {
    lines.close();
    run(JSON.parse(line) as P).catch((error: unknown) => {
      process.stderr.write(`${String(error)}\n`);
      process.exit(2);
    });
  });
  process.stdout.write("loaded\n");
}
