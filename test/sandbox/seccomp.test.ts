/**
 * The keyring filter's program, run instruction by instruction for each architecture it is built
 * for (x86_64 is also loaded by the kernel in test/security/sandbox.test.ts; arm64 cannot be
 * here): the keyring calls of the machine's own and its 32-bit architecture answer ENOSYS, every
 * other call and every other architecture is let through, and no jump leaves the program.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { keyringFilter } from "../../src/sandbox/seccomp.js";

const ALLOW = 0x7fff0000;
const ENOSYS = 0x00050000 | 38;

/** Runs a classic BPF seccomp program (the three instructions it uses) on {nr, arch}. */
function run(program: Buffer, nr: number, arch: number): number {
  const count = program.length / 8;
  let acc = 0;
  for (let pc = 0; pc < count; ) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program.readUInt8(pc * 8 + 2);
    const jf = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    if (code === 0x20) {
      assert.ok(k === 0 || k === 4, `a load of offset ${k}`);
      acc = k === 0 ? nr : arch;
      pc++;
    } else if (code === 0x15) {
      pc += 1 + (acc === k ? jt : jf);
    } else if (code === 0x06) {
      return k;
    } else {
      assert.fail(`instruction ${code.toString(16)} at ${pc}`);
    }
  }
  return assert.fail("the program ran off its end");
}

const MACHINES = {
  x64: { native: 0xc000003e, compat: 0x40000003, denied: [248, 249, 250, 0x400000f8, 0x400000f9, 0x400000fa], compatDenied: [286, 287, 288], other: [0, 1, 59, 231, 247, 251, 0x40000000] },
  arm64: { native: 0xc00000b7, compat: 0x40000028, denied: [217, 218, 219], compatDenied: [309, 310, 311], other: [0, 63, 64, 216, 220, 221] },
} as const;

describe("the keyring seccomp filter", () => {
  for (const [machine, m] of Object.entries(MACHINES)) {
    it(`${machine}: add_key, request_key and keyctl answer ENOSYS, on its own and its 32-bit architecture; nothing else is refused`, () => {
      const program = keyringFilter(machine)!;
      assert.ok(program !== undefined && program.length % 8 === 0);
      for (const nr of m.denied) assert.equal(run(program, nr, m.native), ENOSYS, `call ${nr}`);
      for (const nr of m.compatDenied) assert.equal(run(program, nr, m.compat), ENOSYS, `compat call ${nr}`);
      for (const nr of m.other) assert.equal(run(program, nr, m.native), ALLOW, `call ${nr}`);
      // A 32-bit call with a 64-bit keyring number is another call there, and the reverse.
      for (const nr of m.compatDenied) assert.equal(run(program, nr, m.native), ALLOW);
      assert.equal(run(program, 250, 0x12345678), ALLOW, "an architecture the kernel does not run here");
    });
  }

  it("is not built where warden does not know the call numbers", () => {
    assert.equal(keyringFilter("ppc64"), undefined);
  });
});
