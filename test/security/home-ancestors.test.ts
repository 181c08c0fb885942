/**
 * A state directory under a directory other users can write (DESIGN.md G10: foreign owners and
 * group/world permission bits in the state directory are refused). The node keeps no descriptor
 * of its home: it opens journals, outputs, keys and materializations by path. Whoever can write
 * a directory above the home can rename the home away while the node runs and put a directory of
 * their own in its place; the node then writes its new journals, outputs and even a fresh signing
 * key there (seen on a real node under a world-writable /tmp/<dir>, as the README's walkthrough
 * places one). So a home is refused when an ancestor is writable by group or others without the
 * sticky bit, as OpenSSH refuses such a home for its keys. /tmp itself (sticky) is fine.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { openWarden } from "../../src/warden/facade.js";
import { isWardenError } from "../../src/core/errors.js";

describe("security: a home another user could rename away is refused", () => {
  let root: string;
  before(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "warden-security-home-"));
  });
  after(() => {
    fs.chmodSync(root, 0o700);
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("under a world-writable directory without the sticky bit: refused, and nothing is created", async () => {
    const shared = path.join(root, "shared");
    fs.mkdirSync(shared);
    fs.chmodSync(shared, 0o777);
    const home = path.join(shared, "home");
    let refused: unknown;
    try {
      const opened = await openWarden({ home });
      await opened.close();
    } catch (error) {
      refused = error;
    }
    assert.equal(fs.existsSync(home), false, "the home was created under the unsafe directory");
    assert.ok(isWardenError(refused), String(refused));
    assert.equal(refused.code, "unsafe-storage-ancestor-writable");
    assert.ok(refused.message.includes(shared), refused.message);
  });

  it("the same directory with the sticky bit (as /tmp): the node opens", async () => {
    const sticky = path.join(root, "sticky");
    fs.mkdirSync(sticky);
    fs.chmodSync(sticky, 0o1777);
    const warden = await openWarden({ home: path.join(sticky, "home") });
    await warden.close();
  });
});
