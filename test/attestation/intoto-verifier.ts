/**
 * Runs test/fixtures/intoto/verify_dsse.py: Debian's securesystemslib (code warden did not write)
 * checks an envelope's Ed25519 signature with keys as `GET /v1/keys` serves them.
 */
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { randomUUID } from "node:crypto";

const SCRIPT = fileURLToPath(new URL("../fixtures/intoto/verify_dsse.py", import.meta.url));
/** Debian's interpreter, where python3-securesystemslib installs (scripts/test-prereqs.mjs). */
const PYTHON = "/usr/bin/python3";

export interface PythonVerdict {
  readonly exitCode: number;
  readonly ok: boolean;
  readonly key_id?: string;
  readonly statement?: Record<string, unknown>;
  readonly error?: string;
  readonly stderr: string;
}

/** `envelope`: the envelope's bytes exactly as they are to be checked; `keys`: the body of GET /v1/keys. */
export function verifyWithSecuresystemslib(dir: string, envelope: string | Uint8Array, keys: unknown): Promise<PythonVerdict> {
  const name = randomUUID();
  const envelopeFile = join(dir, `${name}.envelope.json`);
  const keysFile = join(dir, `${name}.keys.json`);
  writeFileSync(envelopeFile, envelope);
  writeFileSync(keysFile, JSON.stringify(keys));
  return new Promise((resolve, reject) => {
    execFile(PYTHON, [SCRIPT, envelopeFile, keysFile], { timeout: 120_000 }, (error, stdout, stderr) => {
      const exitCode = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
      if (exitCode === -1) return reject(new Error(`${PYTHON} ${SCRIPT} did not run (is python3-securesystemslib installed?): ${String(error)}\n${stderr}`));
      try {
        const verdict = JSON.parse(stdout.trim().split("\n").at(-1) ?? "") as Omit<PythonVerdict, "exitCode" | "stderr">;
        resolve({ ...verdict, exitCode, stderr });
      } catch {
        reject(new Error(`the verifier printed no verdict (exit ${exitCode}): ${stdout}\n${stderr}`));
      }
    });
  });
}
