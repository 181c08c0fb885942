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
 */
import { createRequire } from "node:module";
import type * as CedarModule from "@cedar-policy/cedar-wasm/nodejs";
import { sha256Digest, type Digest } from "../core/digest.js";
import { ValidationError } from "../core/errors.js";
import { CEDAR_SCHEMA, POLICY_SCHEMA_NAME, type ToolAction } from "./schema.js";

type Cedar = typeof CedarModule;
let cedarModule: Cedar | undefined;
function cedar(): Cedar {
  cedarModule ??= createRequire(import.meta.url)("@cedar-policy/cedar-wasm/nodejs") as Cedar;
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

export class ToolPolicy {
  /** sha256 of the policy's text, as run.started records it */
  readonly digest: Digest;
  readonly schema = POLICY_SCHEMA_NAME;
  /** the policy ids, in file order */
  readonly ids: readonly string[];
  readonly #meta: ReadonlyMap<string, PolicyMeta>;
  readonly #setId: string;

  private constructor(digest: Digest, ids: readonly string[], meta: ReadonlyMap<string, PolicyMeta>) {
    this.digest = digest;
    this.ids = ids;
    this.#meta = meta;
    this.#setId = `warden:${digest}`;
  }

  /**
   * Parses and validates `text` (named `source` in errors); refused `tool-policy-invalid` with Cedar's
   * own messages when it does not parse, names a duplicate id, or does not validate against the
   * schema (an unknown action, attribute or type is a mistake, not a rule that never matches).
   */
  static compile(text: string, source: string): ToolPolicy {
    if (Buffer.byteLength(text) > MAX_POLICY_BYTES) throw invalid(source, [`over ${MAX_POLICY_BYTES} bytes`]);
    const c = cedar();
    const parts = c.policySetTextToParts(text);
    if (parts.type === "failure") throw invalid(source, parts.errors.map((e) => e.message));
    if (parts.policy_templates.length > 0) throw invalid(source, ["templates are not supported"]);
    const policies: Record<string, string> = {};
    const meta = new Map<string, PolicyMeta>();
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
    });
    const validated = c.validate({ schema: CEDAR_SCHEMA, policies: { staticPolicies: policies }, validationSettings: { mode: "strict" } });
    if (validated.type === "failure") throw invalid(source, validated.errors.map((e) => e.message));
    if (validated.validationErrors.length > 0) throw invalid(source, validated.validationErrors.map((e) => `policy ${JSON.stringify(e.policyId)}: ${e.error.message}`));
    const policy = new ToolPolicy(sha256Digest(text), Object.keys(policies), meta);
    const parsed = c.preparsePolicySet(policy.#setId, { staticPolicies: policies });
    if (parsed.type === "failure") throw invalid(source, parsed.errors.map((e) => e.message));
    ensureSchema(c);
    return policy;
  }

  /** The decision for one call. An evaluation error denies (fail closed). */
  decide(request: ToolRequest): ToolVerdict {
    const answer = cedar().statefulIsAuthorized({
      principal: { type: "Caller", id: request.principal.scope },
      action: { type: "Action", id: request.action },
      resource: { type: "Call", id: request.callId },
      context: { ...request.context, signers: [...request.context.signers] },
      preparsedSchemaName: POLICY_SCHEMA_NAME,
      validateRequest: true,
      preparsedPolicySetId: this.#setId,
      entities: [
        { uid: { type: "Caller", id: request.principal.scope }, attrs: { name: request.principal.name, role: request.principal.role }, parents: [] },
        { uid: { type: "Call", id: request.callId }, attrs: { ...request.resource, paths: [...request.resource.paths] }, parents: [] },
      ],
    });
    if (answer.type === "failure") {
      return { decision: "deny", policies: [], reason: `the policy could not be evaluated: ${answer.errors.map((e) => e.message).join("; ")}` };
    }
    const { decision, diagnostics } = answer.response;
    const ids = [...diagnostics.reason].sort();
    if (decision === "allow") {
      // A policy that errored is skipped by Cedar; for a forbid that would turn a denial into an allow.
      if (diagnostics.errors.length > 0) {
        return { decision: "deny", policies: diagnostics.errors.map((e) => e.policyId).sort(), reason: `a policy could not be evaluated: ${diagnostics.errors.map((e) => e.error.message).join("; ")}` };
      }
      return { decision: "allow", policies: ids };
    }
    if (ids.length === 0) return { decision: "deny", policies: [], reason: `no policy permits ${request.action} here` };
    const metas = ids.map((id) => this.#meta.get(id));
    const ask = metas.every((m) => m?.ask === true);
    const reasons = ids.map((id, i) => metas[i]?.reason ?? id);
    return { decision: ask ? "ask" : "deny", policies: ids, reason: `${ask ? "needs an operator's approval" : "forbidden"} by policy ${reasons.join("; ")}` };
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
