import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { isWardenError } from "../../src/core/errors.js";
import { breachOf, NO_SPEND, runBudget, SpendMeter, withinDay } from "../../src/runner/spend.js";

describe("spend: budgets and the meter", () => {
  it("a request lowers the node's budget and may not raise it", () => {
    assert.deepEqual(runBudget({ input_tokens: 100, turns: 5 }, { input_tokens: 50, wall_s: 9 }), { input_tokens: 50, turns: 5, wall_s: 9 });
    assert.throws(
      () => runBudget({ input_tokens: 100 }, { input_tokens: 101 }),
      (e: unknown) => isWardenError(e) && e.code === "budget-over-limit" && e.status === 422,
    );
  });

  it("what is left of a day caps the run; a spent day names its limit", () => {
    const spent = { ...NO_SPEND, input_tokens: 70, cost_usd_micros: 2_000_000 };
    assert.deepEqual(withinDay({ input_tokens: 50 }, { input_tokens: 100, cost_usd: 5 }, spent), { budget: { input_tokens: 30, cost_usd: 3 } });
    assert.deepEqual(withinDay({}, { cost_usd: 2 }, spent), { spent: "cost_usd" });
    assert.deepEqual(withinDay({ turns: 3 }, undefined, spent), { budget: { turns: 3 } });
  });

  it("meters turns by id (a repeated id's latest counts), prices each at its model, and lets a larger CLI total win", () => {
    const meter = new SpendMeter({ a: { input_per_mtok: 3, output_per_mtok: 15 }, "*": { input_per_mtok: 1, output_per_mtok: 1 } }, "fallback", 1000);
    meter.take({ type: "turn", id: "m1", model: "a", input_tokens: 100, output_tokens: 1 });
    meter.take({ type: "turn", id: "m1", model: "a", input_tokens: 100, output_tokens: 10 });
    meter.take({ type: "turn", id: "m2", input_tokens: 50, output_tokens: 5 });
    assert.deepEqual(meter.totals(3500), { input_tokens: 150, output_tokens: 15, cost_usd_micros: 100 * 3 + 10 * 15 + 50 + 5, turns: 2, wall_ms: 2500 });
    assert.equal(breachOf({ turns: 3, output_tokens: 15 }, meter.totals(3500)), "output_tokens");
    assert.equal(breachOf({ turns: 3 }, meter.totals(3500)), undefined);
    meter.take({ type: "turn", id: "result", input_tokens: 200, output_tokens: 15, total: true });
    meter.end(4000);
    const totals = meter.totals(9999);
    assert.equal(totals.input_tokens, 200);
    assert.equal(totals.turns, 2);
    assert.equal(totals.wall_ms, 3000);
  });
});
