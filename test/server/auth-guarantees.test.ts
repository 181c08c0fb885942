/**
 * G12's constant-time token comparison, pinned by a mutation audit: a presented token is compared
 * with crypto.timingSafeEqual over 32-byte digests against every known token (no early exit), and
 * token hashes of another length are refused up front. Timing itself is too noisy to test; the
 * comparison that makes it constant is observed on the real crypto function (it still answers).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { hashToken, type TokenRecord } from "../../src/config/tokens.js";
import { TokenAuthority } from "../../src/server/auth.js";

const cryptoModule = createRequire(import.meta.url)("node:crypto") as typeof import("node:crypto");

/** Records every timingSafeEqual call (the real one still answers) while `body` runs. */
function withComparisonSpy(body: () => void): Array<{ a: number; b: number }> {
  const real = cryptoModule.timingSafeEqual;
  const calls: Array<{ a: number; b: number }> = [];
  cryptoModule.timingSafeEqual = (a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView): boolean => {
    calls.push({ a: a.byteLength, b: b.byteLength });
    return real(a, b);
  };
  syncBuiltinESMExports();
  try {
    body();
  } finally {
    cryptoModule.timingSafeEqual = real;
    syncBuiltinESMExports();
  }
  return calls;
}

describe("token comparison", () => {
  const tokens: TokenRecord[] = [
    { name: "first", role: "operator", hash: hashToken("token-one") },
    { name: "second", role: "observer", hash: hashToken("token-two") },
    { name: "third", role: "observer", hash: hashToken("token-three") },
  ];

  it("compares 32-byte digests with timingSafeEqual against every known token, also after a match", () => {
    const authority = new TokenAuthority(tokens);
    for (const [presented, expected] of [
      ["token-one", "first"],
      ["token-three", "third"],
      ["no-such-token", undefined],
    ] as const) {
      let caller: string | undefined;
      const calls = withComparisonSpy(() => {
        try {
          caller = authority.authenticate(`Bearer ${presented}`).name;
        } catch (error) {
          assert.equal((error as { code?: string }).code, "unauthorized");
        }
      });
      assert.equal(caller, expected);
      assert.equal(calls.length, tokens.length, `${presented}: one constant-time comparison per known token`);
      for (const call of calls) assert.deepEqual(call, { a: 32, b: 32 }, "digests, never the token itself");
    }
  });

  it("refuses a token hash that is not 32 bytes when the authority is built", () => {
    assert.throws(() => new TokenAuthority([{ name: "short", role: "operator", hash: Buffer.alloc(31) }]), TypeError);
    assert.throws(() => new TokenAuthority([{ name: "hex-text", role: "operator", hash: Buffer.from(hashToken("x").toString("hex")) }]), TypeError);
  });
});
