/**
 * A tool policy: Cedar policies, validated against warden's schema (schema.ts) when loaded, and
 * the decision they give for one tool call (DESIGN.md "Governed tool calls").
 *
 * Cedar answers allow or deny; warden reads a third answer, **ask**, from annotations: a call
 * denied only by `forbid` policies that all carry `@ask` needs an operator's approval. Policy ids
 * are the policies' `@id("…")` annotations (else `policy<n>`, n counting from 0 in the file), so a
 * decision names rules an operator wrote. A policy's `@reason("…")` is what the agent is told.
 *
 * Cedar is loaded on first use: a node without policies never pays for the WebAssembly module.
 *
 * Cedar's cost grows with every policy it is given, matching or not (a few microseconds each in
 * WebAssembly), so a call is not given the whole set. At load the set is split by action (a
 * policy whose scope names other actions cannot be satisfied by this call) and, within an action,
 * by a **guard**: the first condition of a policy that starts with `when { <attr> like "…" && …`
 * or `when { <attr> == "…" && …` on a string attribute. Cedar evaluates the scope, then the
 * conditions in order, left to right, stopping at the first false one, and neither the scope nor
 * such a comparison can fail on a request that validated, so a policy whose guard is false is
 * neither satisfied nor in error: leaving it out changes nothing in the answer. A call is
 * evaluated against its action's unguarded policies (preparsed at load) and, apart, the guarded
 * ones whose guard holds (preparsed on first use, a few dozen such sets kept), and the two answers
 * are put together as Cedar puts policies together. test/policy/tool-policy.test.ts compares the
 * result with the whole set's on generated policies and calls.
 */
import { createRequire } from "node:module";
import { setFlagsFromString } from "node:v8";
import type * as CedarModule from "@cedar-policy/cedar-wasm/nodejs";
import { sha256Digest, type Digest } from "../core/digest.js";
import { ValidationError } from "../core/errors.js";
import { CEDAR_SCHEMA, POLICY_SCHEMA_NAME, TOOL_ACTIONS, type ToolAction } from "./schema.js";

type Cedar = typeof CedarModule;
let cedarModule: Cedar | undefined;
function cedar(): Cedar {
  if (cedarModule === undefined) {
    // Node 20's V8 (11.3) dies with a fatal error ("unreachable code" in the Deoptimizer, no way to
    // catch it, in a worker thread too) when TurboFan has inlined a call into Cedar's WebAssembly
    // and deoptimizes through it; without that inlining it does not (docs/DESIGN.md "Governed tool
    // calls"). Set before any code calling Cedar is optimized, which is what the flag governs.
    setFlagsFromString("--no-turbo-inline-js-wasm-calls");
    cedarModule = createRequire(import.meta.url)("@cedar-policy/cedar-wasm/nodejs") as Cedar;
  }
  return cedarModule;
}

export type ToolDecision = "allow" | "deny" | "ask";

/** What one tool call is, in the schema's terms. */
export interface ToolRequest {
  readonly principal: { readonly scope: string; readonly name: string; readonly role: string };
  readonly action: ToolAction;
  /** the call's id (the effect id its journal entries carry) */
  readonly callId: string;
  readonly resource: {
    readonly tool: string;
    readonly command: string;
    /** the first of `paths` ("" when none): Cedar matches patterns (`like`) on strings, not on sets */
    readonly path: string;
    readonly paths: readonly string[];
    readonly host: string;
    readonly url: string;
    readonly mcp_server: string;
    readonly mcp_tool: string;
  };
  readonly context: {
    readonly workspace: string;
    readonly run: string;
    readonly provider: string;
    readonly bundle_id: string;
    readonly revision: string;
    readonly signers: readonly string[];
  };
}

export interface ToolVerdict {
  readonly decision: ToolDecision;
  /** the policies that decided it (for a deny without any: none permits the call) */
  readonly policies: readonly string[];
  /** why, in words the agent is shown (deny and ask only) */
  readonly reason?: string;
}

/** Longest policy file, bytes. */
export const MAX_POLICY_BYTES = 1024 * 1024;

interface PolicyMeta {
  readonly ask: boolean;
  readonly reason?: string;
}

export interface CompileOptions {
  /**
   * false: every call is evaluated against the whole set, as Cedar would without warden's index
   * (the reference the index is tested against). Default true.
   */
  readonly index?: boolean;
}

/** What a call is evaluated against, for one action. */
interface ActionPlan {
  /** the preparsed set of every policy of the action, preparsed when first needed (rarely) */
  readonly all: () => string;
  /** the preparsed set of the action's policies without a guard (none: there are none) */
  readonly unguarded: string | undefined;
  /** the action's guarded policies, by the attribute their guard reads (`principal.role`, …) */
  readonly guarded: ReadonlyMap<string, readonly { readonly id: string; readonly test: (value: string) => boolean }[]>;
}

/** Guards holding for one call past which the call is evaluated against its action's whole set. */
const MAX_HOLDING = 32;
/** Sets of guarded policies kept preparsed (by which guards held), per policy. */
const HOLDING_SETS = 32;
/** Tells apart the preparsed sets of two policies compiled from one text. */
let compiledCount = 0;

/** Cedar's answer, or the answers of disjoint parts of a set put together. */
type Answer = { readonly type: "failure"; readonly messages: readonly string[] } | { readonly type: "success"; readonly decision: "allow" | "deny"; readonly reason: readonly string[]; readonly errors: readonly CedarModule.AuthorizationError[] };

export class ToolPolicy {
  /** sha256 of the policy's text, as run.started records it */
  readonly digest: Digest;
  readonly schema = POLICY_SCHEMA_NAME;
  /** the policy ids, in file order */
  readonly ids: readonly string[];
  readonly #meta: ReadonlyMap<string, PolicyMeta>;
  readonly #plans: ReadonlyMap<ToolAction, ActionPlan>;
  readonly #policies: Readonly<Record<string, string>>;
  readonly #prefix: string;
  /** preparsed sets of guarded policies, by the JSON of their ids; least recently used first */
  readonly #holdingSets = new Map<string, string>();

  private constructor(digest: Digest, meta: ReadonlyMap<string, PolicyMeta>, policies: Readonly<Record<string, string>>, prefix: string, plans: ReadonlyMap<ToolAction, ActionPlan>) {
    this.digest = digest;
    this.ids = Object.keys(policies);
    this.#meta = meta;
    this.#policies = policies;
    this.#prefix = prefix;
    this.#plans = plans;
  }

  /**
   * Parses and validates `text` (named `source` in errors); refused `tool-policy-invalid` with Cedar's
   * own messages when it does not parse, names a duplicate id, or does not validate against the
   * schema (an unknown action, attribute or type is a mistake, not a rule that never matches).
   */
  static compile(text: string, source: string, options: CompileOptions = {}): ToolPolicy {
    if (Buffer.byteLength(text) > MAX_POLICY_BYTES) throw invalid(source, [`over ${MAX_POLICY_BYTES} bytes`]);
    const c = cedar();
    const parts = c.policySetTextToParts(text);
    if (parts.type === "failure") throw invalid(source, parts.errors.map((e) => e.message));
    if (parts.policy_templates.length > 0) throw invalid(source, ["templates are not supported"]);
    const policies: Record<string, string> = {};
    const meta = new Map<string, PolicyMeta>();
    const shapes: PolicyShape[] = [];
    parts.policies.forEach((policy, i) => {
      const json = c.policyToJson(policy);
      if (json.type === "failure") throw invalid(source, json.errors.map((e) => e.message));
      const annotations = json.json.annotations ?? {};
      const id = typeof annotations.id === "string" && annotations.id !== "" ? annotations.id : `policy${i}`;
      if (Object.hasOwn(policies, id)) throw invalid(source, [`two policies have the id ${JSON.stringify(id)}`]);
      policies[id] = policy;
      const ask = Object.hasOwn(annotations, "ask");
      if (ask && json.json.effect !== "forbid") throw invalid(source, [`policy ${JSON.stringify(id)}: @ask belongs on a forbid policy (it turns that denial into a question)`]);
      meta.set(id, { ask, ...(typeof annotations.reason === "string" ? { reason: annotations.reason } : {}) });
      shapes.push({ id, actions: actionsOf(json.json), guard: guardOf(json.json) });
    });
    const validated = c.validate({ schema: CEDAR_SCHEMA, policies: { staticPolicies: policies }, validationSettings: { mode: "strict" } });
    if (validated.type === "failure") throw invalid(source, validated.errors.map((e) => e.message));
    if (validated.validationErrors.length > 0) throw invalid(source, validated.validationErrors.map((e) => `policy ${JSON.stringify(e.policyId)}: ${e.error.message}`));
    ensureSchema(c);
    const digest = sha256Digest(text);
    const prefix = `warden:${digest}:${compiledCount++}`;
    const plans = new Map<ToolAction, ActionPlan>();
    const preparse = (setId: string, ids: readonly string[]): string => {
      const parsed = c.preparsePolicySet(setId, { staticPolicies: Object.fromEntries(ids.map((id) => [id, policies[id]!])) });
      if (parsed.type === "failure") throw invalid(source, parsed.errors.map((e) => e.message));
      return setId;
    };
    if (options.index === false) {
      const whole = preparse(`${prefix}:whole`, Object.keys(policies));
      for (const action of TOOL_ACTIONS) plans.set(action, { all: () => whole, unguarded: whole, guarded: new Map() });
    } else {
      for (const action of TOOL_ACTIONS) {
        const mine = shapes.filter((s) => s.actions === "all" || s.actions.has(action));
        const guarded = new Map<string, { id: string; test: (value: string) => boolean }[]>();
        for (const { id, guard } of mine) {
          if (guard === undefined) continue;
          const key = `${guard.variable}.${guard.attr}`;
          guarded.set(key, [...(guarded.get(key) ?? []), { id, test: guard.test }]);
        }
        // Each set parses its policies again: only what a call needs is preparsed at load.
        let allId: string | undefined;
        const all = (): string => (allId ??= preparse(`${prefix}:${action}`, mine.map((s) => s.id)));
        const rest = mine.filter((s) => s.guard === undefined).map((s) => s.id);
        const unguarded = guarded.size === 0 ? all() : rest.length === 0 ? undefined : preparse(`${prefix}:${action}:unguarded`, rest);
        plans.set(action, { all, unguarded, guarded });
      }
    }
    return new ToolPolicy(digest, meta, policies, prefix, plans);
  }

  /** The decision for one call. An evaluation error denies (fail closed). */
  decide(request: ToolRequest): ToolVerdict {
    const answer = this.#evaluate(request);
    if (answer.type === "failure") {
      return { decision: "deny", policies: [], reason: `the policy could not be evaluated: ${answer.messages.join("; ")}` };
    }
    const ids = [...answer.reason].sort();
    if (answer.decision === "allow") {
      // A policy that errored is skipped by Cedar; for a forbid that would turn a denial into an allow.
      if (answer.errors.length > 0) {
        // In policy id order: the reason is journaled, and must not depend on the order Cedar met them in.
        const errors = [...answer.errors].sort((a, b) => (a.policyId < b.policyId ? -1 : a.policyId > b.policyId ? 1 : 0));
        return { decision: "deny", policies: errors.map((e) => e.policyId), reason: `a policy could not be evaluated: ${errors.map((e) => e.error.message).join("; ")}` };
      }
      return { decision: "allow", policies: ids };
    }
    if (ids.length === 0) return { decision: "deny", policies: [], reason: `no policy permits ${request.action} here` };
    const metas = ids.map((id) => this.#meta.get(id));
    const ask = metas.every((m) => m?.ask === true);
    const reasons = ids.map((id, i) => metas[i]?.reason ?? id);
    return { decision: ask ? "ask" : "deny", policies: ids, reason: `${ask ? "needs an operator's approval" : "forbidden"} by policy ${reasons.join("; ")}` };
  }

  /**
   * Cedar's answer over the policies that can apply to the call: its action's unguarded policies
   * and the guarded ones whose guard holds, as two disjoint sets evaluated apart and put together
   * as Cedar puts policies together (any satisfied forbid denies, naming the satisfied forbids;
   * else any satisfied permit allows, naming those; else deny naming none; errors from both).
   */
  #evaluate(request: ToolRequest): Answer {
    const plan = this.#plans.get(request.action);
    // An action outside the schema: Cedar refuses the request whatever the set.
    if (plan === undefined) return this.#cedar(request, [...this.#plans.values()][0]!.all());
    const holding: string[] = [];
    if (plan.guarded.size > 0) {
      const values = guardValues(request);
      for (const [key, policies] of plan.guarded) {
        const value = values.get(key);
        for (const p of policies) if (value === undefined || p.test(value)) holding.push(p.id);
      }
    }
    if (holding.length > MAX_HOLDING) return this.#cedar(request, plan.all());
    const sets = [...(plan.unguarded === undefined ? [] : [plan.unguarded]), ...(holding.length === 0 ? [] : [this.#holdingSet(holding)])];
    // Nothing can apply: Cedar still judges the request itself (an invalid one fails, not denies).
    if (sets.length === 0) return this.#cedar(request, this.#holdingSet([]));
    const answers: Answer[] = [];
    for (const set of sets) {
      const answer = this.#cedar(request, set);
      if (answer.type === "failure") return answer;
      answers.push(answer);
    }
    if (answers.length === 1) return answers[0]!;
    const ok = answers as Extract<Answer, { type: "success" }>[];
    const errors = ok.flatMap((a) => a.errors);
    const forbids = ok.flatMap((a) => (a.decision === "deny" ? a.reason : []));
    if (forbids.length > 0) return { type: "success", decision: "deny", reason: forbids, errors };
    const permits = ok.flatMap((a) => (a.decision === "allow" ? a.reason : []));
    return { type: "success", decision: permits.length > 0 ? "allow" : "deny", reason: permits, errors };
  }

  /** The preparsed set of these guarded policies, kept for the next call whose guards are these. */
  #holdingSet(ids: readonly string[]): string {
    const key = JSON.stringify(ids);
    const known = this.#holdingSets.get(key);
    if (known !== undefined) {
      this.#holdingSets.delete(key);
      this.#holdingSets.set(key, known);
      return known;
    }
    let setId = `${this.#prefix}:holding:${this.#holdingSets.size}`;
    if (this.#holdingSets.size >= HOLDING_SETS) {
      // The least recently used set's id is preparsed again: Cedar replaces a set under an id it has.
      const [oldest, id] = this.#holdingSets.entries().next().value as [string, string];
      this.#holdingSets.delete(oldest);
      setId = id;
    }
    const parsed = cedar().preparsePolicySet(setId, { staticPolicies: Object.fromEntries(ids.map((id) => [id, this.#policies[id]!])) });
    // These policies parsed when the policy was loaded: parsing them again cannot fail.
    if (parsed.type === "failure") throw new Error(`a tool policy's own policies do not parse again: ${parsed.errors.map((e) => e.message).join("; ")}`);
    this.#holdingSets.set(key, setId);
    return setId;
  }

  #cedar(request: ToolRequest, setId: string): Answer {
    const answer = cedar().statefulIsAuthorized({
      principal: { type: "Caller", id: request.principal.scope },
      action: { type: "Action", id: request.action },
      resource: { type: "Call", id: request.callId },
      context: { ...request.context, signers: [...request.context.signers] },
      preparsedSchemaName: POLICY_SCHEMA_NAME,
      validateRequest: true,
      preparsedPolicySetId: setId,
      entities: [
        { uid: { type: "Caller", id: request.principal.scope }, attrs: { name: request.principal.name, role: request.principal.role }, parents: [] },
        { uid: { type: "Call", id: request.callId }, attrs: { ...request.resource, paths: [...request.resource.paths] }, parents: [] },
      ],
    });
    if (answer.type === "failure") return { type: "failure", messages: answer.errors.map((e) => e.message) };
    return { type: "success", decision: answer.response.decision, reason: answer.response.diagnostics.reason, errors: answer.response.diagnostics.errors };
  }
}

let schemaParsed = false;
function ensureSchema(c: Cedar): void {
  if (schemaParsed) return;
  const parsed = c.preparseSchema(POLICY_SCHEMA_NAME, CEDAR_SCHEMA);
  if (parsed.type === "failure") throw new Error(`warden's own Cedar schema does not parse: ${parsed.errors.map((e) => e.message).join("; ")}`);
  schemaParsed = true;
}

function invalid(source: string, messages: readonly string[]): ValidationError {
  return new ValidationError("tool-policy-invalid", `tool policy ${source}: ${messages.join("; ")}`, { details: { source } });
}

/** What the index needs of one policy. */
interface PolicyShape {
  readonly id: string;
  /** the actions its scope admits */
  readonly actions: ReadonlySet<string> | "all";
  readonly guard?: Guard;
}

/** A comparison a policy cannot be satisfied without (see the module's comment). */
interface Guard {
  readonly variable: Variable;
  readonly attr: string;
  /** the comparison, on a well-formed value of the attribute */
  test(value: string): boolean;
}

/** A policy in Cedar's JSON form, as far as the index reads it. */
type PolicyJson = CedarModule.PolicyJson;
type Expr = Record<string, unknown>;

function actionsOf(policy: PolicyJson): ReadonlySet<string> | "all" {
  const scope = policy.action as { op: string; entity?: { type?: string; id?: string }; entities?: { type?: string; id?: string }[] };
  // The schema has no action groups, so `action in A` is `action == A`.
  const named = scope.op === "==" || scope.op === "in" ? (scope.entities ?? (scope.entity === undefined ? undefined : [scope.entity])) : undefined;
  // Anything else (All, or a form this code does not know) goes to every call: a superset is always right.
  if (named === undefined || !named.every((e) => e.type === "Action" && typeof e.id === "string")) return "all";
  return new Set(named.map((e) => e.id!));
}

/** The string attributes of the schema (schema.ts), by variable. */
const STRING_ATTRS = {
  principal: ["name", "role"],
  resource: ["tool", "command", "path", "host", "url", "mcp_server", "mcp_tool"],
  context: ["workspace", "run", "provider", "bundle_id", "revision"],
} as const;
type Variable = keyof typeof STRING_ATTRS;

/**
 * The guard of a policy: the leftmost operand of the `&&` chain of its first condition, when that
 * condition is a `when` and the operand is `<var>.<string attribute> like <pattern>` or `==` a string.
 */
function guardOf(policy: PolicyJson): Guard | undefined {
  const first = policy.conditions[0];
  if (first === undefined || first.kind !== "when") return undefined;
  let expr = first.body as Expr;
  while (isObject(expr["&&"])) expr = (expr["&&"] as { left: Expr }).left;
  if (isObject(expr.like)) {
    const like = expr.like as { left: Expr; pattern: unknown };
    const attribute = attributeOf(like.left);
    const pattern = patternOf(like.pattern);
    if (attribute === undefined || pattern === undefined) return undefined;
    return { ...attribute, test: likeTest(pattern) };
  }
  if (isObject(expr["=="])) {
    const { left, right } = expr["=="] as { left: Expr; right: Expr };
    const [attr, literal] = isObject(left?.["."]) ? [left, right] : [right, left];
    const attribute = attr === undefined ? undefined : attributeOf(attr);
    const value = literal?.Value;
    if (attribute === undefined || typeof value !== "string") return undefined;
    return { ...attribute, test: (v) => v === value };
  }
  return undefined;
}

/**
 * The call's string attributes the guards read, each once, as `${variable}.${attr}`. A value that
 * is not well-formed UTF-16 (a lone surrogate) may reach Cedar changed or not at all: it is left
 * out, and a guard on it is taken to hold, so that Cedar alone decides.
 */
function guardValues(request: ToolRequest): Map<string, string> {
  const values = new Map<string, string>();
  for (const variable of Object.keys(STRING_ATTRS) as Variable[]) {
    const record = request[variable] as unknown as Record<string, unknown>;
    for (const attr of STRING_ATTRS[variable]) {
      const value = record[attr];
      if (typeof value === "string" && !/\p{Cs}/u.test(value)) values.set(`${variable}.${attr}`, value);
    }
  }
  return values;
}

function attributeOf(expr: Expr): { variable: Variable; attr: string } | undefined {
  const access = expr["."] as { left?: Expr; attr?: unknown } | undefined;
  if (!isObject(access) || !isObject(access.left) || typeof access.attr !== "string") return undefined;
  const variable = access.left.Var;
  if (variable !== "principal" && variable !== "resource" && variable !== "context") return undefined;
  if (!(STRING_ATTRS[variable] as readonly string[]).includes(access.attr)) return undefined;
  return { variable, attr: access.attr };
}

/** A `like` pattern, one entry per character (Cedar's JSON form): the character, or null for `*`. */
function patternOf(pattern: unknown): (string | null)[] | undefined {
  if (!Array.isArray(pattern)) return undefined;
  const out: (string | null)[] = [];
  for (const part of pattern) {
    if (part === "Wildcard") out.push(null);
    else if (isObject(part) && typeof part.Literal === "string" && [...part.Literal].length === 1) out.push(part.Literal);
    else return undefined;
  }
  return out;
}

/**
 * Cedar's `like`: `*` matches any run of characters, anything else itself. On well-formed UTF-16
 * matching code units is matching characters: a literal character never starts with a low
 * surrogate, so no match can begin inside a pair. The literal runs between stars are placed
 * leftmost, one after the other, which finds a match whenever there is one.
 */
function likeTest(pattern: readonly (string | null)[]): (value: string) => boolean {
  const runs = [""];
  for (const part of pattern) {
    if (part === null) runs.push("");
    else runs[runs.length - 1] += part;
  }
  const first = runs[0]!;
  if (runs.length === 1) return (value) => value === first;
  const last = runs[runs.length - 1]!;
  const middle = runs.slice(1, -1).filter((r) => r !== "");
  return (value) => {
    if (value.length < first.length + last.length || !value.startsWith(first) || !value.endsWith(last)) return false;
    const end = value.length - last.length;
    let at = first.length;
    for (const run of middle) {
      const i = value.indexOf(run, at);
      if (i < 0 || i + run.length > end) return false;
      at = i + run.length;
    }
    return true;
  };
}

function isObject(value: unknown): value is Expr {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
