/**
 * Signs a bundle statement with the real OpenSSH `ssh-keygen -Y sign` (namespace warden-bundle):
 * it already handles ssh-agent, passphrase prompts (on the terminal, or SSH_ASKPASS) and security
 * keys (the touch prompt), so warden holds no private key code of its own.
 *
 * `key` is a private key file, or a public key / certificate file whose private half ssh-agent
 * holds; `agent: true` signs with the first key ssh-agent lists (`ssh-add -L`).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WardenError } from "../core/errors.js";

export const SIGNATURE_NAMESPACE = "warden-bundle";

export type SignWith = { readonly key: string } | { readonly agent: true };

export interface SshSignOptions {
  /** the ssh-keygen to run (default: `ssh-keygen` on PATH) */
  readonly sshKeygen?: string;
  readonly env?: NodeJS.ProcessEnv;
}

/** The armored SSHSIG of `message` by the key `with` names. */
export async function sshSign(message: string, with_: SignWith, options: SshSignOptions = {}): Promise<string> {
  const keygen = options.sshKeygen ?? "ssh-keygen";
  const env = options.env ?? process.env;
  let cleanup: string | undefined;
  try {
    let keyFile: string;
    if ("agent" in with_) {
      const listed = await run("ssh-add", ["-L"], "", env, "list the keys ssh-agent holds");
      const first = listed.split("\n").find((l) => l.trim() !== "");
      if (first === undefined) throw signFailed("ssh-agent holds no key (ssh-add -L lists none)");
      cleanup = mkdtempSync(join(tmpdir(), "warden-sign-"));
      keyFile = join(cleanup, "agent-key.pub");
      writeFileSync(keyFile, `${first}\n`, { mode: 0o600 });
    } else keyFile = with_.key;
    const out = await run(keygen, ["-Y", "sign", "-n", SIGNATURE_NAMESPACE, "-f", keyFile], message, env, `sign with ${keyFile}`);
    if (!out.startsWith("-----BEGIN SSH SIGNATURE-----")) throw signFailed(`ssh-keygen -Y sign wrote no signature for ${keyFile}`);
    return out;
  } finally {
    if (cleanup !== undefined) rmSync(cleanup, { recursive: true, force: true });
  }
}

/** The local signing step failed (nothing was sent to the node). */
function signFailed(message: string): WardenError {
  return new WardenError("sign-failed", message, 500);
}

/** Runs a command with `input` on stdin; its stderr (prompts, notices) goes to the user's terminal. */
function run(command: string, args: readonly string[], input: string, env: NodeJS.ProcessEnv, doing: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"], env });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (b: Buffer) => out.push(b));
    child.stderr.on("data", (b: Buffer) => {
      err.push(b);
      // Prompts ("Confirm user presence…", "Enter passphrase") must reach the user as they come.
      if (process.stderr.isTTY) process.stderr.write(b);
    });
    child.on("error", (error: NodeJS.ErrnoException) => {
      reject(signFailed(error.code === "ENOENT" ? `${command} is not installed (OpenSSH's ssh-keygen signs bundles)` : `could not ${doing}: ${error.message}`));
    });
    child.on("close", (code) => {
      if (code === 0) resolve(Buffer.concat(out).toString("utf8"));
      else {
        const why = Buffer.concat(err).toString("utf8").trim().split("\n").filter((l) => !/^Signing data on standard input/.test(l)).pop() ?? "";
        reject(signFailed(`could not ${doing}: ${command} exited with ${String(code)}${why === "" ? "" : ` (${why})`}`));
      }
    });
    child.stdin.on("error", () => undefined);
    child.stdin.end(input);
  });
}
