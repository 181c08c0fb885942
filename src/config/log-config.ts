/**
 * The transparency log's serve flags: `--log-origin ORIGIN`, `--witness NAME=URL` with the
 * witness's cosignature vkey as `--witness-key VKEY` (matched by the vkey's key name).
 */
import { ValidationError } from "../core/errors.js";
import { verifierFor } from "../tlog/cosignature.js";
import { isKeyName, parseVkey, SIG_COSIGNATURE_V1 } from "../tlog/note.js";
import type { WitnessConfig } from "../tlog/witness-client.js";
import type { LogOptions } from "../warden/transparency.js";

export interface LogFlags {
  readonly logOrigin?: string;
  readonly witness?: readonly string[];
  readonly witnessKey?: readonly string[];
}

export function logOptionsOf(flags: LogFlags): LogOptions {
  const keys = (flags.witnessKey ?? []).map((vkey) => {
    const verifier = parseVkey(vkey, verifierFor);
    if (verifier.type !== SIG_COSIGNATURE_V1) throw new ValidationError("config-witness-invalid", `--witness-key ${vkey}: a witness key is a cosignature/v1 vkey (type 0x04)`);
    return verifier;
  });
  const witnesses: WitnessConfig[] = (flags.witness ?? []).map((spec) => {
    const at = spec.indexOf("=");
    const name = spec.slice(0, at);
    const url = spec.slice(at + 1);
    if (at <= 0 || !/^https?:\/\//.test(url)) throw new ValidationError("config-witness-invalid", `--witness ${spec}: expected NAME=http(s)://…`);
    const verifier = keys.find((k) => k.name === name);
    if (verifier === undefined) throw new ValidationError("config-witness-invalid", `--witness ${name}: no --witness-key with the key name ${name}`);
    return { name, url, verifier };
  });
  if (flags.logOrigin !== undefined && !isKeyName(flags.logOrigin)) {
    throw new ValidationError("config-log-origin-invalid", `--log-origin ${flags.logOrigin}: an origin is non-empty, with no spaces and no "+"`);
  }
  return { ...(flags.logOrigin === undefined ? {} : { origin: flags.logOrigin }), ...(witnesses.length === 0 ? {} : { witnesses }) };
}
