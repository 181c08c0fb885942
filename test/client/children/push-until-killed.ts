/**
 * Child of the push-resume test: pushes a directory with the real client and SIGKILLs itself
 * right after the node acknowledged chunk number `killAfter` — no cleanup, no goodbye, the way a
 * client dies when its machine loses power. Prints one line per acknowledged chunk (`ack <bytes>`)
 * so the parent knows how far the node got.
 *
 * argv: <url> <token> <dir> <bundleId> <revision> <chunkBytes> <concurrency> <killAfter>
 */
import { WardenClient } from "../../../src/client/index.js";

const [url, token, dir, bundleId, revision, chunkBytes, concurrency, killAfter] = process.argv.slice(2) as [string, string, string, string, string, string, string, string];
const client = new WardenClient({ url, token });
let acked = 0;
let bytes = 0;
await client.push(dir, {
  bundleId,
  revision,
  chunkBytes: Number(chunkBytes),
  concurrency: Number(concurrency),
  hooks: {
    afterChunk: (chunk) => {
      acked++;
      bytes += chunk.length;
      process.stdout.write(`ack ${bytes}\n`);
      if (acked === Number(killAfter)) process.kill(process.pid, "SIGKILL");
    },
  },
});
process.stdout.write("completed\n");
