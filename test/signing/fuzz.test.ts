/**
 * Malformed signatures and allowed_signers files, generated with fast-check: truncated armor, bad
 * base64, flipped and cut blobs, unknown key types, huge inputs. Every one is either accepted as
 * what it is or refused with one of the documented codes — never another exception, never a
 * signature that verifies after its bytes changed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { parseAllowedSigners } from "../../src/signing/allowed-signers.js";
import { encodeArmor, parseSshsig, verifySshsig } from "../../src/signing/sshsig.js";
import { bundleStatement } from "../../src/signing/statement.js";
import { codeOf, makeKey, sshSignWith } from "./ssh-fixtures.js";
import { tempDir } from "../support/temp.js";

const SIGNATURE_CODES = new Set(["bundle-signature-malformed", "bundle-signature-key-unsupported", "bundle-signature-invalid"]);

const statement = bundleStatement({ bundle_id: "fuzz", revision: "r1", bundle_digest: "sha256:" + "c".repeat(64), manifest_digest: "sha256:" + "d".repeat(64) });
const message = Buffer.from(statement);
const dir = tempDir("sign");
const keys = [makeKey(dir, "e", "ed25519"), makeKey(dir, "p", "ecdsa", 256), makeKey(dir, "r", "rsa", 2048)];
const signatures = keys.map((k) => sshSignWith(k.path, statement));
const blobs = signatures.map((s) => Buffer.from(parseSshsig(s).blob));

test("arbitrary text as a signature: parsed or refused with a signature code", () => {
  fc.assert(
    fc.property(fc.oneof(fc.string({ maxLength: 400 }), fc.string({ maxLength: 200 }).map((s) => `-----BEGIN SSH SIGNATURE-----\n${s}\n-----END SSH SIGNATURE-----`)), (text) => {
      const code = codeOf(() => verifySshsig(parseSshsig(text), message, "warden-bundle"));
      assert.ok(SIGNATURE_CODES.has(code), code);
    }),
    { numRuns: 500 },
  );
});

test("real signatures flipped, cut or extended: refused with a code, never verified", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: blobs.length - 1 }),
      fc.oneof(
        fc.record({ kind: fc.constant("flip" as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
        fc.record({ kind: fc.constant("cut" as const), at: fc.nat() }),
        fc.record({ kind: fc.constant("extend" as const), extra: fc.uint8Array({ minLength: 1, maxLength: 64 }) }),
      ),
      (which, edit) => {
        const original = blobs[which]!;
        let blob: Buffer;
        if (edit.kind === "flip") {
          blob = Buffer.from(original);
          const at = edit.at % blob.length;
          // The reserved field is ignored by design (PROTOCOL.sshsig); its length is not.
          blob[at]! ^= 1 << edit.bit;
        } else if (edit.kind === "cut") blob = original.subarray(0, edit.at % original.length);
        else blob = Buffer.concat([original, edit.extra]);
        const code = codeOf(() => verifySshsig(parseSshsig(encodeArmor(blob)), message, "warden-bundle"));
        assert.ok(SIGNATURE_CODES.has(code), `${edit.kind}: ${code}`);
      },
    ),
    { numRuns: 600 },
  );
  // The armor itself cut anywhere.
  for (const armored of signatures) {
    for (let cut = 0; cut < armored.length - 2; cut += 7) {
      const code = codeOf(() => verifySshsig(parseSshsig(armored.slice(0, cut)), message, "warden-bundle"));
      assert.ok(SIGNATURE_CODES.has(code), code);
    }
  }
});

test("arbitrary allowed_signers lines: parsed or refused with allowed-signers-invalid", () => {
  const pieces = [...keys.map((k) => k.publicLine), "cert-authority", 'namespaces="warden-bundle"', 'valid-after="20200101Z"', 'valid-before="2020"', '"a b"', "a,b", "ssh-dss AAAA", "#", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5", "!x", "*", "="];
  const line = fc.array(fc.oneof(fc.constantFrom(...pieces), fc.string({ maxLength: 12 })), { maxLength: 6 }).map((parts) => parts.join(" "));
  fc.assert(
    fc.property(fc.array(line, { maxLength: 8 }), (lines) => {
      const code = codeOf(() => parseAllowedSigners(lines.join("\n"), "fuzz"));
      assert.ok(code === "accepted" || code === "allowed-signers-invalid", code);
    }),
    { numRuns: 800 },
  );
  assert.equal(codeOf(() => parseAllowedSigners("a ".repeat(9_000_000), "huge")), "allowed-signers-invalid");
});
