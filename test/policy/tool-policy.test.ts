/**
 * A tool policy's index (src/policy/tool-policy.ts): a call is evaluated against only the policies
 * that can apply to it (by action, and by the guard each policy starts with), and the answer must
 * be the one the whole set gives. Generated policies and calls, from a fixed seed, compared with
 * the same text compiled without the index (every policy on every call): scopes naming one action,
 * several or none; `when` and `unless`, `like` and `==` on every string attribute, patterns with
 * `*`, a literal `\*` and characters outside the BMP; conditions that fail to evaluate (an
 * overflow) before and after a guard; `@ask`; forbid beside permit.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { TOOL_ACTIONS, type ToolAction } from "../../src/policy/schema.js";
import { ToolPolicy, type ToolRequest } from "../../src/policy/tool-policy.js";

/** mulberry32: a small seeded generator, so a failure can be replayed from its seed. */
function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ["git", "push", "status", "rm -rf build/", "ls", "/srv/deploy/app.yml", "a*b", "é", "😀", "", "main", "operator", "release", "example.com"];
const STRING_ATTRS: Record<"principal" | "resource" | "context", readonly string[]> = {
  principal: ["name", "role"],
  resource: ["tool", "command", "path", "host", "url", "mcp_server", "mcp_tool"],
  context: ["workspace", "run", "provider", "bundle_id", "revision"],
};

class Gen {
  readonly #random: () => number;
  constructor(seed: number) {
    this.#random = generator(seed);
  }
  int(n: number): number {
    return Math.floor(this.#random() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  chance(p: number): boolean {
    return this.#random() < p;
  }
  /** A value: one or two words, so that patterns built from words match some values and not others. */
  value(): string {
    return this.chance(0.5) ? this.pick(WORDS) : `${this.pick(WORDS)} ${this.pick(WORDS)}`;
  }
  attribute(): string {
    const variable = this.pick(["principal", "resource", "resource", "resource", "context"] as const);
    return `${variable}.${this.pick(STRING_ATTRS[variable])}`;
  }
  literal(text: string): string {
    return JSON.stringify(text);
  }
  /** A `like` pattern's text: words, `*`, and a literal star (`\*`). */
  pattern(): string {
    const parts: string[] = [];
    for (let i = 0, n = 1 + this.int(3); i < n; i++) {
      const r = this.int(4);
      parts.push(r === 0 ? "*" : r === 1 ? "\\*" : JSON.stringify(this.pick(WORDS)).slice(1, -1));
    }
    return `"${parts.join("")}"`;
  }
  /** A comparison that can be a policy's guard, or something else. */
  atom(): string {
    switch (this.int(7)) {
      case 0:
      case 1:
        return `${this.attribute()} like ${this.pattern()}`;
      case 2:
        return this.chance(0.5) ? `${this.attribute()} == ${this.literal(this.value())}` : `${this.literal(this.value())} == ${this.attribute()}`;
      case 3:
        return `resource.paths.contains(${this.literal(this.pick(WORDS))})`;
      case 4:
        return `context.signers.contains(${this.literal(this.pick(["release", "ci"]))})`;
      case 5:
        // Fails to evaluate (a Long overflow): Cedar skips the policy and reports it as an error.
        return `(9223372036854775807 + ${this.int(2)} > 0)`;
      default:
        return this.chance(0.5) ? "true" : "false";
    }
  }
  expr(depth = 0): string {
    if (depth >= 2 || this.chance(0.4)) return this.atom();
    switch (this.int(4)) {
      case 0:
      case 1:
        return `${this.atom()} && ${this.expr(depth + 1)}`;
      case 2:
        return `(${this.expr(depth + 1)} || ${this.expr(depth + 1)})`;
      default:
        return `!(${this.expr(depth + 1)})`;
    }
  }
  action(): string {
    const r = this.int(4);
    if (r === 0) return "action";
    if (r === 1 || r === 2) return `action == Action::${this.literal(this.pick(TOOL_ACTIONS))}`;
    return `action in [${[this.pick(TOOL_ACTIONS), this.pick(TOOL_ACTIONS)].map((a) => `Action::${this.literal(a)}`).join(", ")}]`;
  }
  policy(i: number): string {
    const forbid = this.chance(0.5);
    const annotations = [this.chance(0.7) ? `@id("p${i}")` : "", forbid && this.chance(0.4) ? "@ask" : "", this.chance(0.3) ? `@reason("reason ${i}")` : ""].join(" ");
    const principal = this.pick(["principal", "principal", `principal == Caller::"api:op"`, "principal is Caller"]);
    const conditions: string[] = [];
    for (let c = 0, n = this.int(3); c < n; c++) conditions.push(`${this.chance(0.7) ? "when" : "unless"} { ${this.expr()} }`);
    return `${annotations} ${forbid ? "forbid" : "permit"}(${principal}, ${this.action()}, resource) ${conditions.join(" ")};`;
  }
  request(n: number): ToolRequest {
    const paths = this.chance(0.5) ? [] : [this.pick(WORDS), this.pick(WORDS)];
    return {
      principal: { scope: this.pick(["api:op", "api:other"]), name: this.value(), role: this.pick(["operator", "library", this.value()]) },
      action: this.pick(TOOL_ACTIONS) as ToolAction,
      callId: `claude:toolu_${n}`,
      resource: { tool: this.value(), command: this.value(), path: paths[0] ?? "", paths, host: this.value(), url: this.value(), mcp_server: this.value(), mcp_tool: this.value() },
      context: { workspace: this.value(), run: this.value(), provider: this.value(), bundle_id: this.value(), revision: this.value(), signers: this.chance(0.5) ? ["release"] : [] },
    };
  }
}

/** Compiles a generated policy set; a generated policy the validator refuses is replaced (rare). */
function compiled(gen: Gen, size: number): { text: string; indexed: ToolPolicy; whole: ToolPolicy } {
  for (;;) {
    const text = Array.from({ length: size }, (_, i) => gen.policy(i)).join("\n");
    try {
      return { text, indexed: ToolPolicy.compile(text, "generated"), whole: ToolPolicy.compile(text, "generated", { index: false }) };
    } catch (error) {
      if (!/tool-policy-invalid|validat/i.test(String((error as { code?: string }).code ?? error))) throw error;
    }
  }
}

describe("a tool policy's index", () => {
  it("gives every generated call the decision, policies and reason the whole set gives", () => {
    const seed = 31;
    const gen = new Gen(seed);
    const tally = { allow: 0, deny: 0, ask: 0, errors: 0, sets: 0 };
    let call = 0;
    for (let set = 0; set < 60; set++) {
      const { text, indexed, whole } = compiled(gen, 1 + gen.int(12));
      tally.sets++;
      for (let r = 0; r < 40; r++) {
        const request = gen.request(call++);
        const expected = whole.decide(request);
        const actual = indexed.decide(request);
        assert.deepEqual(actual, expected, `seed ${seed}, set ${set}, request ${r}\npolicies:\n${text}\nrequest: ${JSON.stringify(request)}`);
        tally[expected.decision]++;
        if (expected.reason?.includes("could not be evaluated") === true) tally.errors++;
      }
    }
    // The generator must reach every kind of answer, or the comparison proves little.
    for (const [what, n] of Object.entries(tally)) assert.ok(n >= 20, `only ${n} ${what} among the generated calls: ${JSON.stringify(tally)}`);
  });

  it("a condition that fails before a false comparison is still an error (the guard is only the first comparison)", () => {
    const text = `@id("e") forbid(principal, action, resource) when { (9223372036854775807 + 1 > 0) && resource.command like "*never*" };
@id("all") permit(principal, action, resource);`;
    const request = new Gen(2).request(0);
    const expected = ToolPolicy.compile(text, "errors", { index: false }).decide(request);
    assert.equal(expected.decision, "deny");
    assert.match(expected.reason ?? "", /could not be evaluated/);
    assert.deepEqual(ToolPolicy.compile(text, "errors").decide(request), expected);
  });

  it("calls whose guards hold in many combinations (more than the sets kept, and more than evaluated apart)", () => {
    const words = Array.from({ length: 40 }, (_, i) => `w${i}x`);
    const text = [
      ...words.map((w, i) => `@id("p${i}") permit(principal, action == Action::"shell", resource) when { resource.command like "*${w}*" };`),
      ...words.slice(0, 5).map((w, i) => `@id("f${i}") forbid(principal, action, resource) when { resource.command == "${w}" };`),
      `@id("mcp") permit(principal, action == Action::"mcp", resource);`,
    ].join("\n");
    const indexed = ToolPolicy.compile(text, "combinations");
    const whole = ToolPolicy.compile(text, "combinations", { index: false });
    const gen = new Gen(7);
    for (let n = 0; n < 150; n++) {
      const chosen = n % 25 === 0 ? words : n % 10 === 0 ? [gen.pick(words.slice(0, 5))] : words.filter(() => gen.chance(0.1));
      const base = gen.request(n);
      const request: ToolRequest = { ...base, action: gen.chance(0.8) ? "shell" : gen.pick(TOOL_ACTIONS), resource: { ...base.resource, command: chosen.join(chosen.length === 1 && gen.chance(0.5) ? "" : " ") } };
      assert.deepEqual(indexed.decide(request), whole.decide(request), JSON.stringify(request));
    }
  });

  it("like: every pattern of up to five of a, b and * against every string of up to five a and b", () => {
    const strings = [""];
    for (let n = 1; n <= 5; n++) for (let i = 0; i < 2 ** n; i++) strings.push(Array.from({ length: n }, (_, b) => ((i >> b) & 1 ? "b" : "a")).join(""));
    const patterns: string[] = [];
    for (let n = 1; n <= 5; n++) for (let i = 0; i < 3 ** n; i++) patterns.push(Array.from({ length: n }, (_, d) => "ab*"[Math.floor(i / 3 ** d) % 3]).join(""));
    // 24 patterns a set: at most that many guards hold, so each call takes the index's own path.
    for (let from = 0; from < patterns.length; from += 24) {
      const text = patterns.slice(from, from + 24).map((p, i) => `@id("l${from + i}") permit(principal, action, resource) when { resource.command like "${p}" };`).join("\n");
      const indexed = ToolPolicy.compile(text, "like");
      const whole = ToolPolicy.compile(text, "like", { index: false });
      const base = new Gen(3).request(0);
      for (const command of strings) {
        const request: ToolRequest = { ...base, action: "shell", resource: { ...base.resource, command } };
        assert.deepEqual(indexed.decide(request), whole.decide(request), `${command}\n${text}`);
      }
    }
  });

  it("a set of 1,000 guarded rules: a call no guard matches, one a guard matches, and another action", () => {
    const rules = Array.from({ length: 999 }, (_, i) => `@id("r${i}") forbid(principal, action == Action::"shell", resource) when { resource.command like "*tool-${i} *" };`);
    const text = [...rules, `@id("operators") permit(principal, action, resource) when { principal.role == "operator" };`].join("\n");
    const indexed = ToolPolicy.compile(text, "1000 rules");
    const whole = ToolPolicy.compile(text, "1000 rules", { index: false });
    const base = new Gen(1).request(0);
    for (const [action, command, decision] of [
      ["shell", "ls -la src", "allow"],
      ["shell", "run tool-417 now", "deny"],
      ["file.read", "run tool-417 now", "allow"],
    ] as const) {
      const request: ToolRequest = { ...base, action, principal: { ...base.principal, role: "operator" }, resource: { ...base.resource, command } };
      assert.equal(indexed.decide(request).decision, decision, command);
      assert.deepEqual(indexed.decide(request), whole.decide(request), command);
    }
  });
});
