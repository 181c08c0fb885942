/**
 * Real OpenSSH for the signing tests: keys made by ssh-keygen, signatures by `ssh-keygen -Y sign`,
 * verification by `ssh-keygen -Y verify` (an implementation warden did not write).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function tempDir(prefix = "warden-sign-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface TestKey {
  readonly path: string;
  readonly pub: string;
  /** `type base64` of the public key (no comment) */
  readonly publicLine: string;
  /** as `ssh-keygen -l` prints it */
  readonly fingerprint: string;
}

function keygen(args: readonly string[], input?: string, env?: NodeJS.ProcessEnv): string {
  const r = spawnSync("ssh-keygen", args, { input: input ?? "", encoding: "utf8", env: env ?? process.env });
  if (r.status !== 0) throw new Error(`ssh-keygen ${args.join(" ")} failed: ${r.stderr}`);
  return r.stdout;
}

export function makeKey(dir: string, name: string, type: "ed25519" | "ecdsa" | "rsa", bits?: number, passphrase = ""): TestKey {
  const path = join(dir, name);
  keygen(["-q", "-t", type, ...(bits === undefined ? [] : ["-b", String(bits)]), "-N", passphrase, "-C", `${name}@test`, "-f", path]);
  return keyAt(path);
}

export function keyAt(path: string): TestKey {
  const pub = `${path}.pub`;
  const publicLine = readFileSync(pub, "utf8").trim().split(/\s+/).slice(0, 2).join(" ");
  const fingerprint = keygen(["-l", "-E", "sha256", "-f", pub]).split(/\s+/)[1]!;
  return { path, pub, publicLine, fingerprint };
}

/** `ssh-keygen -Y sign` of `message` (on stdin); the armored signature. */
export function sshSignWith(keyFile: string, message: string, namespace = "warden-bundle", env?: NodeJS.ProcessEnv): string {
  return keygen(["-Y", "sign", "-n", namespace, "-f", keyFile], message, env);
}

/** Signs a user certificate for `key` by CA key `ca`: principals, validity (ssh-keygen -V syntax). */
export function certify(ca: string, key: TestKey, principals: readonly string[], validity = "-1d:+1d"): string {
  keygen(["-q", "-s", ca, "-I", "test-cert", "-n", principals.join(","), "-V", validity, key.pub]);
  return key.path + "-cert.pub";
}

/** `ssh-keygen -Y verify`: true when OpenSSH accepts the signature for `principal`. */
export function opensshVerifies(allowedSigners: string, principal: string, message: string, signature: string, dir: string): { ok: boolean; output: string } {
  const sigFile = join(dir, `sig-${Math.random().toString(36).slice(2)}`);
  writeFileSync(sigFile, signature);
  const r = spawnSync("ssh-keygen", ["-Y", "verify", "-f", allowedSigners, "-I", principal, "-n", "warden-bundle", "-s", sigFile], {
    input: message,
    encoding: "utf8",
  });
  return { ok: r.status === 0, output: `${r.stdout}${r.stderr}` };
}
