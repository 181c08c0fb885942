/**
 * The suite's generated content is arbitrary data, never what the bundle contract refuses at commit:
 * a test that meant "some bytes" failed in CI when a random seed made a file start with `MZ`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { executableFormatOf } from "../../src/delivery/contract/executable.js";
import { bytesOf } from "../delivery/store-harness.js";

test("bytesOf never starts with an executable's magic bytes, over 300,000 seeds (8 of them would without its guard)", () => {
  const starts: number[] = [];
  for (let seed = 0; seed < 300_000; seed++) if (executableFormatOf(bytesOf(seed, 8)) !== undefined) starts.push(seed);
  assert.deepEqual(starts, [], "seeds whose bytes a commit would refuse as executable content");
});
