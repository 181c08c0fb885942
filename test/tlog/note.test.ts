import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { generateSigningKey } from "../../src/journal/keys.js";
import { parseCheckpointText, formatCheckpoint } from "../../src/tlog/checkpoint.js";
import { cosign, cosignatureTimestamp, cosignatureVerifier, cosignedMessage, verifierFor } from "../../src/tlog/cosignature.js";
import { ed25519NoteSigner, formatVkey, openNote, parseNote, parseVkey, SIG_COSIGNATURE_V1, SIG_ED25519, signNote } from "../../src/tlog/note.js";
import { formatTileIndex, formatTilePath, parseTilePath } from "../../src/tlog/tiles.js";
import { EMPTY_ROOT } from "../../src/tlog/merkle.js";
import { ValidationError } from "../../src/core/errors.js";

// The examples of the C2SP specifications, byte for byte (c2sp.org/signed-note, tlog-checkpoint, tlog-cosignature).
const SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";
const SPEC_NOTE = "This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n";
const SPEC_COSIGNED =
  "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n" +
  "\u2014 example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n" +
  "\u2014 witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n";
const SPEC_COSIGNED_MESSAGE = "cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";

describe("C2SP signed notes, checkpoints and cosignatures", () => {
  test("the signed-note spec's example verifies with the spec's vkey; a changed byte does not", () => {
    const verifier = parseVkey(SPEC_VKEY);
    assert.equal(verifier.keyId, 0x530d903a);
    assert.equal(formatVkey(verifier.name, SIG_ED25519, verifier.publicKey), SPEC_VKEY);
    assert.deepEqual(openNote(parseNote(SPEC_NOTE), [verifier]).map((v) => v.name), ["example.com/foo"]);
    const changed = SPEC_NOTE.replace("example message", "example messagE");
    assert.throws(() => openNote(parseNote(changed), [verifier]), (e: unknown) => e instanceof ValidationError && e.code === "note-not-verified" && e.status === 403);
  });

  test("the tlog-cosignature example: its signature bytes are key id, timestamp and a 64-byte signature over the spec's cosigned message", () => {
    const note = parseNote(SPEC_COSIGNED);
    const checkpoint = parseCheckpointText(note.text);
    assert.equal(checkpoint.origin, "example.com/behind-the-sofa");
    assert.equal(checkpoint.size, 20852163);
    assert.equal(formatCheckpoint(checkpoint), note.text);
    const witness = note.signatures[1]!;
    assert.equal(witness.name, "witness.example.com/w1");
    assert.equal(witness.keyId, 0x8d66cf3f);
    const timestamp = cosignatureTimestamp(witness.signature);
    assert.equal(timestamp, 1679315147);
    assert.equal(cosignedMessage(note.text, timestamp!).toString("utf8"), SPEC_COSIGNED_MESSAGE);
  });

  test("a cosignature we make has the spec's layout and verifies only for its own checkpoint text", () => {
    const { key } = generateSigningKey();
    const text = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
    const line = cosign("witness.example.com/w1", key, text, 1679315147);
    const sig = parseNote(`${text}\n${line}`).signatures[0]!;
    assert.equal(sig.signature.byteLength, 72);
    assert.equal(sig.signature.subarray(0, 8).toString("hex"), "0000000064184fcb".replace("4fcb", "50cb"));
    const vkey = formatVkey("witness.example.com/w1", SIG_COSIGNATURE_V1, key.public_key);
    const verifier = parseVkey(vkey, verifierFor);
    assert.equal(verifier.keyId, sig.keyId);
    assert.equal(openNote(parseNote(`${text}\n${line}`), [verifier]).length, 1);
    const other = text.replace("20852163", "20852164");
    assert.throws(() => openNote(parseNote(`${other}\n${line}`), [verifier]), /does not verify/);
    // The same key as an Ed25519 note key has another id: it does not accept the cosignature.
    assert.throws(() => openNote(parseNote(`${text}\n${line}`), [cosignatureVerifier("witness.example.com/w2", key.public_key)]), /no signature of a trusted key/);
  });

  test("a checkpoint signed by a node key round-trips and is refused when malformed", () => {
    const { key } = generateSigningKey();
    const signer = ed25519NoteSigner("warden.example/log", key);
    const note = signNote(formatCheckpoint({ origin: "warden.example/log", size: 0, root: EMPTY_ROOT }), [signer]);
    const verifier = parseVkey(formatVkey("warden.example/log", SIG_ED25519, key.public_key));
    assert.equal(openNote(parseNote(note), [verifier]).length, 1);
    for (const bad of ["o\n01\n" + EMPTY_ROOT.toString("base64") + "\n", "o\n1\nAAAA\n", "\n1\n" + EMPTY_ROOT.toString("base64") + "\n", "o\n1\n"]) {
      assert.throws(() => parseCheckpointText(bad), (e: unknown) => e instanceof ValidationError && e.code === "checkpoint-malformed", bad);
    }
    for (const bad of ["no blank line\n", "text\n\n\u2014 name\n", "text\n\n- name AAAAAAAA\n", "te\tx\n\n\u2014 n AAAAAAAA\n"]) {
      assert.throws(() => parseNote(bad), (e: unknown) => e instanceof ValidationError && e.code === "note-malformed", bad);
    }
  });

  test("tile paths as tlog-tiles spells them", () => {
    assert.equal(formatTileIndex(1234067), "x001/x234/067");
    assert.equal(formatTilePath({ level: 0, index: 1234067 }), "tile/0/x001/x234/067");
    assert.equal(formatTilePath({ level: "entries", index: 5, width: 17 }), "tile/entries/005.p/17");
    assert.deepEqual(parseTilePath("0/x001/x234/067"), { level: 0, index: 1234067 });
    assert.deepEqual(parseTilePath("2/000.p/1"), { level: 2, index: 0, width: 1 });
    assert.deepEqual(parseTilePath("entries/001.p/255"), { level: "entries", index: 1, width: 255 });
    for (const bad of ["0/1", "00/001", "64/001", "0/x000/001", "0/001.p/0", "0/001.p/256", "0/001.p/01", "0/x01/001", "0/001/", "../001"]) {
      assert.equal(parseTilePath(bad), undefined, bad);
    }
  });
});
