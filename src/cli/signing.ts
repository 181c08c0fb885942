/** The CLI's bundle-signing flags and how it prints signers (push, bundles sign, bundles show). */
import type { SignerView } from "../client/wire.js";
import { ValidationError } from "../core/errors.js";

/** `--sign FILE` / `--sign-agent` (push) and `--key` / `--agent` (bundles sign): at most one. */
export function signWithOf(key: string | undefined, agent: boolean | undefined, keyFlag: string, agentFlag: string): { key: string } | { agent: true } | undefined {
  if (key !== undefined && agent === true) throw new ValidationError("sign-key-conflict", `give ${keyFlag} or ${agentFlag}, not both`);
  if (key !== undefined) return { key };
  return agent === true ? { agent: true } : undefined;
}

/** One line per signer: principals (or "no principal under the trust policy") and fingerprint. */
export function signersText(signers: readonly SignerView[], indent = "    "): string {
  return signers
    .map((s) => `${indent}signed by ${s.principals.length > 0 ? s.principals.join(", ") : "(no trusted principal)"}  ${s.fingerprint}  ${s.key_type}  ${s.signed_at}\n`)
    .join("");
}
