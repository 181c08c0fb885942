/**
 * Real OpenSSH for the signing tests: keys made by ssh-keygen, signatures by `ssh-keygen -Y sign`,
 * verification by `ssh-keygen -Y verify` (an implementation warden did not write).
 */
import { spawnSync } from "node:child_process";
import { createHash, generateKeyPairSync, sign as cryptoSign } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isWardenError } from "../../src/core/errors.js";
import { encodeArmor, sshsigSignedData } from "../../src/signing/sshsig.js";
import { SshWriter } from "../../src/signing/ssh-wire.js";

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

/** A private ssh-agent for one test: its socket, and how to stop it. */
export async function startAgent(dir: string): Promise<{ sock: string; env: NodeJS.ProcessEnv; stop: () => void }> {
  const { spawn } = await import("node:child_process");
  const { existsSync } = await import("node:fs");
  const { waitFor } = await import("../support/wait.js");
  const sock = join(dir, "agent.sock");
  const child = spawn("ssh-agent", ["-D", "-a", sock], { stdio: "ignore" });
  await waitFor("ssh-agent's socket", () => (existsSync(sock) ? true : undefined), 60_000);
  const env = { ...process.env, SSH_AUTH_SOCK: sock };
  return { sock, env, stop: () => child.kill() };
}

export function sshAdd(env: NodeJS.ProcessEnv, keyPath: string): void {
  const r = spawnSync("ssh-add", ["-q", keyPath], { env, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ssh-add failed: ${r.stderr}`);
}

/** An sk-ssh-ed25519@openssh.com SSHSIG made the way a security key would (PROTOCOL.u2f), by a software key. */
export function skEd25519Signature(text: string, options: { flags?: number; application?: string; namespace?: string } = {}): { armored: string; publicLine: string } {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const raw = Buffer.from(publicKey.export({ format: "jwk" }).x!, "base64url");
  const application = options.application ?? "ssh:";
  const namespace = options.namespace ?? "warden-bundle";
  const flags = options.flags ?? 0x01;
  const counter = 7;
  const keyBlob = new SshWriter().string("sk-ssh-ed25519@openssh.com").string(raw).string(application).bytes();
  const signed = sshsigSignedData(namespace, "sha512", Buffer.from(text, "utf8"));
  const counterBytes = Buffer.alloc(4);
  counterBytes.writeUInt32BE(counter);
  const payload = Buffer.concat([createHash("sha256").update(application).digest(), Buffer.of(flags), counterBytes, createHash("sha256").update(signed).digest()]);
  const value = cryptoSign(null, payload, privateKey);
  const sigWire = new SshWriter().string("sk-ssh-ed25519@openssh.com").string(value).byte(flags).uint32(counter).bytes();
  const blob = new SshWriter().raw("SSHSIG").uint32(1).string(keyBlob).string(namespace).string("").string("sha512").string(sigWire).bytes();
  return { armored: encodeArmor(blob), publicLine: `sk-ssh-ed25519@openssh.com ${keyBlob.toString("base64")}` };
}

/** The code of the WardenError `fn` throws, or "accepted"; any other exception fails the test. */
export function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (isWardenError(error)) return error.code;
    throw error;
  }
  return "accepted";
}
