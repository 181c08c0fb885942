/**
 * DSSE with the node's key: PAE against the specification's own example, and envelopes checked by
 * securesystemslib (Debian's python3-securesystemslib) as well as by warden; a changed byte of the
 * payload or of the signature fails both.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { envelopeJson, IN_TOTO_PAYLOAD_TYPE, pae, signEnvelope, verifyEnvelope, type DsseEnvelope } from "../../src/attestation/dsse.js";
import { generateSigningKey } from "../../src/journal/keys.js";
import { tempDir } from "../support/temp.js";
import { verifyWithSecuresystemslib } from "./intoto-verifier.js";

describe("DSSE envelopes", () => {
  let dir: string;
  before(() => {
    dir = tempDir("dsse");
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("encodes PAE as the DSSE specification's example", () => {
    assert.equal(pae("http://example.com/HelloWorld", Buffer.from("hello world")).toString("utf8"), "DSSEv1 29 http://example.com/HelloWorld 11 hello world");
    // lengths are bytes, not characters
    assert.equal(pae("t", Buffer.from("é")).toString("utf8"), "DSSEv1 1 t 2 é");
  });

  it("signs an in-toto statement that securesystemslib verifies with the published key; a changed byte fails both verifiers", async () => {
    const { key } = generateSigningKey();
    const keys = { keys: [{ key_id: key.key_id, public_key: key.public_key }] };
    const payload = Buffer.from('{"_type":"https://in-toto.io/Statement/v1","predicate":{},"predicateType":"https://warden.dev/attestation/run/v1","subject":[]}');
    const envelope = signEnvelope(IN_TOTO_PAYLOAD_TYPE, payload, key);
    assert.equal(verifyEnvelope(envelope, keys.keys).payload.toString(), payload.toString());
    const good = await verifyWithSecuresystemslib(dir, envelopeJson(envelope), keys);
    assert.equal(good.ok, true, `${good.error ?? ""} ${good.stderr}`);
    assert.equal(good.exitCode, 0);
    assert.equal(good.key_id, key.key_id);
    assert.equal(good.statement?._type, "https://in-toto.io/Statement/v1");

    const flip = (b64: string, at: number): string => {
      const bytes = Buffer.from(b64, "base64");
      bytes[at] = bytes[at]! ^ 0x01;
      return bytes.toString("base64");
    };
    const tampered: Record<string, DsseEnvelope> = {
      payload: { ...envelope, payload: flip(envelope.payload, 20) },
      signature: { ...envelope, signatures: [{ keyid: key.key_id, sig: flip(envelope.signatures[0]!.sig, 10) }] },
      payloadType: { ...envelope, payloadType: "application/vnd.in-toto+jsoN" },
    };
    for (const [what, bad] of Object.entries(tampered)) {
      const verdict = await verifyWithSecuresystemslib(dir, envelopeJson(bad), keys);
      assert.equal(verdict.ok, false, `securesystemslib accepted an envelope whose ${what} changed`);
      assert.equal(verdict.exitCode, 1);
      assert.throws(() => verifyEnvelope(bad, keys.keys), { code: what === "payloadType" ? "attestation-payload-type" : "attestation-signature-invalid" }, what);
    }
    // Another node's key verifies nothing.
    const stranger = generateSigningKey().key;
    const foreign = { keys: [{ key_id: stranger.key_id, public_key: stranger.public_key }] };
    assert.equal((await verifyWithSecuresystemslib(dir, envelopeJson(envelope), foreign)).ok, false);
    assert.throws(() => verifyEnvelope(envelope, foreign.keys), { code: "attestation-unknown-key" });
  });

  it("refuses what is not an envelope with attestation-malformed", () => {
    const { key } = generateSigningKey();
    const keys = [{ key_id: key.key_id, public_key: key.public_key }];
    for (const bad of [null, [], { payload: "e30=", payloadType: IN_TOTO_PAYLOAD_TYPE, signatures: [] }, { payload: "e30", payloadType: IN_TOTO_PAYLOAD_TYPE, signatures: [{ keyid: key.key_id, sig: "" }] }, { payload: "e30=", payloadType: IN_TOTO_PAYLOAD_TYPE, signatures: [{ keyid: key.key_id }] }]) {
      assert.throws(() => verifyEnvelope(bad, keys), { code: "attestation-malformed" }, JSON.stringify(bad));
    }
  });
});
