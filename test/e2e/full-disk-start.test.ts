/**
 * `warden serve` restarted on a home whose file system filled up while it was down: the start is
 * refused in one line that names the full disk (507 capacity-exhausted), not a "disk I/O error"
 * that points at hardware. The disk is a 4 MiB tmpfs mounted in a user and mount namespace of its
 * own (`unshare -rm`), so no privilege is needed and nothing outside the test sees it.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { cliEntry, repo } from "../support/node.js";
import { tempDir } from "../support/temp.js";
import { ownMountsAvailable, runWithOwnMounts } from "../support/own-mounts.js";

/** Starts a node on the tmpfs, stops it, fills the tmpfs, starts it again; prints the second start's exit. */
const SCRIPT = `
set -u
mount -t tmpfs -o size=4m none "$1" || exit 90
H="$1/home"
"$2" --import tsx "$3" serve --home "$H" --listen 127.0.0.1:0 >"$1/first.log" 2>&1 &
first=$!
for i in $(seq 1 600); do [ -f "$H/node.json" ] && break; sleep 0.05; done
[ -f "$H/node.json" ] || { cat "$1/first.log" >&2; exit 91; }
kill -TERM $first; wait $first
dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null
state() { (cd "$H" && find . -type f ! -name node.lock -exec sha256sum {} + | sort); }
before=$(state)
"$2" --import tsx "$3" serve --home "$H" --listen 127.0.0.1:0
code=$?
# Every file stored before is still there, byte for byte; what is new is listed by name.
lost=$(comm -23 <(echo "$before") <(state))
[ -z "$lost" ] && echo "stored files unchanged" >&2 || { echo "changed or gone: $lost" >&2; }
echo "new: $(comm -13 <(echo "$before") <(state) | awk '{print $2}' | sort | tr '\n' ' ')" >&2
echo "exit=$code" >&2
# A fleet node keeps nothing else in its home: publishing node.json is where it meets the full disk.
"$2" --import tsx --input-type=module -e '
const { writeNodeFile } = await import(process.argv[1]);
await writeNodeFile(process.argv[2], { url: "http://127.0.0.1:1", pid: 1 }).then(() => console.log("written"), (e) => console.log("node-file: " + e.code + ": " + e.message));
' "$4" "$H"
`;

describe("a start on a full disk", { skip: ownMountsAvailable ? false : "unshare -rm (user and mount namespaces) is not available here" }, () => {
  let mountpoint: string;
  before(() => {
    mountpoint = tempDir("full-disk");
  });
  after(() => fs.rmSync(mountpoint, { recursive: true, force: true }));

  it("is refused in one line naming the full disk (capacity-exhausted), and changes nothing; so is publishing node.json", async () => {
    const nodeFile = path.join(repo, "src", "server", "node-file.ts");
    const { status, stdout, stderr } = await runWithOwnMounts("full-disk", SCRIPT, [mountpoint, process.execPath, cliEntry, nodeFile]);
    assert.equal(status, 0, stderr);
    const lines = stderr.trimEnd().split("\n");
    assert.equal(lines.at(-1), "exit=1", stderr);
    // SQLite opens its database's companions (-wal empty, -shm its index) before growing them fails.
    const created = lines.at(-2)!.replace(/^new: /, "").trim().split(" ").filter((n) => n !== "");
    for (const name of created) assert.match(name, /^\.\/claims\.sqlite-(wal|shm)$/, stderr);
    assert.equal(lines.at(-3), "stored files unchanged", stderr);
    const message = lines.slice(0, -3);
    assert.equal(message.length, 1, `one line: ${stderr}`);
    assert.match(message[0]!, /^warden: could not .*: storage is full .*\(capacity-exhausted\)$/);
    assert.match(stdout.trim(), /^node-file: capacity-exhausted: could not write .*node\.json: storage is full/, stdout);
    // The namespace's mount went with it: the directory underneath was never written.
    assert.deepEqual(fs.readdirSync(mountpoint), []);
  });
});
