/**
 * C2SP tlog-policy (c2sp.org/tlog-policy): which log keys a verifier trusts, which witnesses, and
 * the quorum of cosignatures a checkpoint needs. Lines: `log <vkey> [url]`,
 * `witness <name> <vkey> [url]`, `group <name> <N|all|any> <member>…`, `quorum <name|none>`;
 * `#` comments and blank lines ignored.
 */
import { malformed, unverifiedNote } from "./errors.js";
import { verifierFor } from "./cosignature.js";
import { openNote, parseNote, parseVkey, SIG_COSIGNATURE_V1, SIG_ED25519, type NoteVerifier } from "./note.js";
import { parseCheckpointText, type Checkpoint } from "./checkpoint.js";

type Rule = { readonly kind: "witness"; readonly verifier: NoteVerifier; readonly url?: string } | { readonly kind: "group"; readonly threshold: number; readonly members: readonly string[] };

export interface Policy {
  readonly logs: readonly NoteVerifier[];
  readonly witnesses: ReadonlyMap<string, { readonly verifier: NoteVerifier; readonly url?: string }>;
  readonly rules: ReadonlyMap<string, Rule>;
  /** the rule a checkpoint must satisfy; undefined for `quorum none` */
  readonly quorum: string | undefined;
}

export function parsePolicy(text: string): Policy {
  const logs: NoteVerifier[] = [];
  const rules = new Map<string, Rule>();
  const witnesses = new Map<string, { verifier: NoteVerifier; url?: string }>();
  let quorum: string | undefined | null = null;
  const fail = (n: number, why: string): never => {
    throw malformed("policy-invalid", `policy line ${n}: ${why}`);
  };
  text.split("\n").forEach((raw, i) => {
    const n = i + 1;
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const [word, ...args] = line.split(/[ \t]+/);
    switch (word) {
      case "log": {
        if (args.length < 1 || args.length > 2) fail(n, "log <vkey> [url]");
        const v = parseVkey(args[0]!, verifierFor);
        if (v.type !== SIG_ED25519) fail(n, "a log key is an Ed25519 note key (type 0x01)");
        if (logs.some((l) => l.publicKey === v.publicKey)) fail(n, "duplicate log key");
        logs.push(v);
        return;
      }
      case "witness": {
        if (args.length < 2 || args.length > 3) fail(n, "witness <name> <vkey> [url]");
        const name = args[0]!;
        if (name === "none" || rules.has(name)) fail(n, `the name ${name} is taken`);
        const v = parseVkey(args[1]!, verifierFor);
        if (v.type !== SIG_COSIGNATURE_V1) fail(n, "a witness key is a cosignature/v1 key (type 0x04)");
        if ([...witnesses.values()].some((w) => w.verifier.publicKey === v.publicKey)) fail(n, "duplicate witness key");
        const entry = args[2] === undefined ? { verifier: v } : { verifier: v, url: args[2] };
        witnesses.set(name, entry);
        rules.set(name, { kind: "witness", ...entry });
        return;
      }
      case "group": {
        if (args.length < 3) fail(n, "group <name> <N|all|any> <member>…");
        const [name, t, ...members] = args as [string, string, ...string[]];
        if (name === "none" || rules.has(name)) fail(n, `the name ${name} is taken`);
        for (const m of members) if (!rules.has(m)) fail(n, `${m} is not defined above`);
        if (new Set(members).size !== members.length) fail(n, "a member is listed twice");
        const threshold = t === "all" ? members.length : t === "any" ? 1 : /^[1-9][0-9]*$/.test(t) ? Number(t) : fail(n, "a threshold is a number, all or any");
        if (threshold > members.length) fail(n, "the threshold exceeds the members");
        rules.set(name, { kind: "group", threshold, members });
        return;
      }
      case "quorum": {
        if (args.length !== 1 || quorum !== null) fail(n, "one quorum <name|none> line");
        if (args[0] !== "none" && !rules.has(args[0]!)) fail(n, `${args[0]} is not defined above`);
        quorum = args[0] === "none" ? undefined : args[0]!;
        return;
      }
      default:
        fail(n, `unknown keyword ${word}`);
    }
  });
  if (quorum === null) throw malformed("policy-invalid", "a policy has a quorum line");
  return { logs, witnesses, rules, quorum };
}

function satisfied(policy: Policy, name: string, cosigned: ReadonlySet<string>): boolean {
  const rule = policy.rules.get(name)!;
  if (rule.kind === "witness") return cosigned.has(name);
  return rule.members.filter((m) => satisfied(policy, m, cosigned)).length >= rule.threshold;
}

export interface VerifiedCheckpoint extends Checkpoint {
  /** the policy's witnesses whose cosignatures verified */
  readonly cosigners: readonly string[];
}

/** A checkpoint signed by one of the policy's logs and cosigned by its quorum, or a 403 `note-not-verified`. */
export function verifyCheckpoint(note: string, policy: Policy): VerifiedCheckpoint {
  const parsed = parseNote(note);
  const checkpoint = parseCheckpointText(parsed.text);
  const log = policy.logs.filter((l) => l.name === checkpoint.origin);
  if (policy.logs.length > 0 && log.length === 0) throw unverifiedNote(`the checkpoint's origin ${checkpoint.origin} is not a log of the policy`);
  openNote(parsed, log);
  const names = [...policy.witnesses.entries()];
  const cosigners = new Set<string>();
  for (const [name, w] of names) {
    const own = parsed.signatures.filter((s) => s.name === w.verifier.name && s.keyId === w.verifier.keyId);
    if (own.length === 0) continue;
    openNote({ text: parsed.text, signatures: own }, [w.verifier]);
    cosigners.add(name);
  }
  if (policy.quorum !== undefined && !satisfied(policy, policy.quorum, cosigners)) {
    throw unverifiedNote(`the checkpoint is cosigned by ${cosigners.size === 0 ? "no witness" : [...cosigners].join(", ")}, not the policy's quorum`);
  }
  return { ...checkpoint, cosigners: [...cosigners] };
}
