import { test, describe } from "node:test";
import assert from "node:assert/strict";
import {
  canonicalJson,
  canonicalDigest,
  sha256Digest,
  isDigest,
  parseDigest,
  DigestStream,
  digestEquals,
  resolveLimits,
  DEFAULT_LIMITS,
  ValidationError,
  WardenError,
} from "../../src/core/index.js";
import { EMPTY_SHA256 } from "../../src/core/digest.js";

describe("digests", () => {
  test("sha256: form and DESIGN.md's blob vector", () => {
    assert.equal(sha256Digest("review\n"), "sha256:452b7b642e325cb2b5b20ac28536ada8b0ad312217a98ab7ff23330603b63126");
    assert.ok(isDigest(sha256Digest("")));
    for (const bad of ["sha256:ABC", "sha256:" + "A".repeat(64), "sha512:" + "a".repeat(64), "sha256:" + "a".repeat(63), "a".repeat(64), 42]) {
      assert.equal(isDigest(bad), false, String(bad));
      assert.throws(() => parseDigest(bad), (e: unknown) => e instanceof ValidationError && e.code === "invalid-digest");
    }
  });

  test("EMPTY_SHA256, written out in the source, is the digest of no bytes", () => {
    assert.equal(EMPTY_SHA256, sha256Digest(new Uint8Array(0)));
  });

  test("streaming digest equals one-shot digest and counts bytes", () => {
    const s = new DigestStream();
    s.update(Buffer.from("rev")).update(Buffer.from("iew\n"));
    const copy = s.copy();
    assert.equal(s.length, 7);
    assert.equal(s.digest(), sha256Digest("review\n"));
    copy.update(Buffer.from("x"));
    assert.equal(copy.digest(), sha256Digest("review\nx"));
  });

  test("constant-time equality is still equality", () => {
    assert.equal(digestEquals("abc", "abc"), true);
    assert.equal(digestEquals("abc", "abd"), false);
    assert.equal(digestEquals("abc", "abcd"), false);
  });
});

describe("canonical JSON (RFC 8785)", () => {
  test("sorts keys by UTF-16 code units and serializes numbers as ECMAScript does", () => {
    // RFC 8785 section 3.2.3 ordering example, and its number forms.
    const value = { "\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis" };
    assert.equal(
      canonicalJson(value),
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
    assert.equal(canonicalJson([1e21, 1e-7, 0.000001, -0, 333333333.33333329, 4.5e-324]), "[1e+21,1e-7,0.000001,0,333333333.3333333,5e-324]");
    assert.equal(canonicalJson({ b: [true, null, "é\u0007"], a: {} }), '{"a":{},"b":[true,null,"é\\u0007"]}');
  });

  test("is independent of key insertion order", () => {
    assert.equal(canonicalDigest({ a: 1, b: { c: 2, d: 3 } }), canonicalDigest({ b: { d: 3, c: 2 }, a: 1 }));
  });

  test("refuses values JSON cannot carry instead of dropping them", () => {
    // A lone surrogate (JSON.parse lets "\ud800" through) has no UTF-8 form: refused in a value and in a key;
    // a surrogate pair (an emoji) is text like any other.
    assert.equal(canonicalJson({ "\ud83d\ude00": "\ud83d\ude00" }), '{"\ud83d\ude00":"\ud83d\ude00"}');
    for (const bad of [{ a: undefined }, [NaN], { f: () => 1 }, Infinity, new Date(0), 1n, "a\ud800", ["\udc00b"], { "\ud800": 1 }, { a: { "x\udfff": "y" } }]) {
      assert.throws(() => canonicalJson(bad), (e: unknown) => e instanceof ValidationError && e.code === "invalid-json");
    }
  });
});

describe("limits", () => {
  test("defaults match DESIGN.md", () => {
    assert.equal(DEFAULT_LIMITS.scopeBytes, 256);
    assert.equal(DEFAULT_LIMITS.requestBytes, 1024 * 1024);
    assert.equal(DEFAULT_LIMITS.journalBytes, 64 * 1024 * 1024);
    assert.equal(DEFAULT_LIMITS.bundleComponents, 128);
    assert.equal(DEFAULT_LIMITS.bundleBytes, 32 * 1024 * 1024);
    assert.equal(DEFAULT_LIMITS.activeStages, 16);
    assert.equal(DEFAULT_LIMITS.stagedBytes, 128 * 1024 * 1024);
    assert.equal(DEFAULT_LIMITS.stageExpiryMs, 15 * 60 * 1000);
    assert.equal(DEFAULT_LIMITS.chunkBytes, 8 * 1024 * 1024);
    assert.equal(DEFAULT_LIMITS.resultRetentionMs, 30 * 24 * 3600 * 1000);
  });

  test("overrides merge; nonsense is refused with a typed error", () => {
    assert.equal(resolveLimits({ fileBytes: 10 }).fileBytes, 10);
    assert.equal(resolveLimits({ fileBytes: 10 }).bundleBytes, DEFAULT_LIMITS.bundleBytes);
    for (const bad of [{ fileBytes: 0 }, { fileBytes: -1 }, { fileBytes: 1.5 }, { nope: 1 } as never]) {
      assert.throws(() => resolveLimits(bad), (e: unknown) => e instanceof WardenError && e.code === "invalid-limit");
    }
  });
});
