/**
 * Bundle signatures (runs with `npm run bench -- delivery`): the trust policy's check at each
 * materialization, under a rule whose allowed_signers file lists 1,000 signers (the signer last),
 * beside the materialization's own time. Target: < 1 ms per materialization. Also the one-off cost
 * of re-reading the file after it changed (a revocation), which the next check pays.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { spawnSync } from "node:child_process";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { openEmbeddedDelivery } from "../src/backends/embedded/delivery/delivery-backend.js";
import { sha256Digest } from "../src/core/digest.js";
import { createManifest } from "../src/delivery/manifest.js";
import { bundleDigestOf } from "../src/delivery/manifest-types.js";
import { Materializer } from "../src/providers/materializer.js";
import { TrustPolicy } from "../src/signing/policy.js";
import { bundleStatement } from "../src/signing/statement.js";
import { SshWriter } from "../src/signing/ssh-wire.js";
import { benchDir, fmt, keepUntilRunEnds, median } from "./baseline.js";

const SIGNERS = 1000;
const CHECKS = 5000;
const MATERIALIZATIONS = 40;

function ed25519Line(principal: string): string {
  const raw = Buffer.from(generateKeyPairSync("ed25519").publicKey.export({ format: "jwk" }).x!, "base64url");
  return `${principal} ssh-ed25519 ${new SshWriter().string("ssh-ed25519").string(raw).bytes().toString("base64")}`;
}

export default async function (): Promise<void> {
  const home = keepUntilRunEnds(benchDir("delivery-signing"));
  const key = join(home, "publisher");
  spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", key]);
  const allowed = join(home, "allowed_signers");
  const lines = Array.from({ length: SIGNERS - 1 }, (_, i) => ed25519Line(`dev${i}@example.com`));
  lines.push(`publisher@example.com ${readFileSync(`${key}.pub`, "utf8").trim()}`);
  writeFileSync(allowed, lines.join("\n") + "\n");
  chmodSync(allowed, 0o644);
  const trust = new TrustPolicy({ rules: [{ bundles: "bench-*", allowed_signers: allowed, any_of: ["publisher@example.com"] }] });

  // A 17-file Claude plugin bundle (about 64 KiB), committed signed.
  const files = [
    { path: ".claude-plugin/plugin.json", content: Buffer.from('{"name":"bench-signed"}\n') },
    { path: "skills/review/SKILL.md", content: Buffer.from("---\nname: review\ndescription: review the diff\n---\nReview.\n") },
    ...Array.from({ length: 15 }, (_, i) => ({ path: `skills/review/ref-${String(i).padStart(2, "0")}.md`, content: Buffer.from(randomBytes(2048).toString("hex")) })),
  ].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
  const manifest = createManifest({
    bundle_id: "bench-signed",
    revision: "r1",
    bundle_digest: bundleDigestOf(files),
    components: files.map((f) => ({ kind: f.path.startsWith("skills/") ? ("skill" as const) : ("plugin-manifest" as const), scope: "session" as const, relative_path: f.path, blob: { digest: sha256Digest(f.content), byte_len: f.content.byteLength } })),
  });
  const signature = spawnSync("ssh-keygen", ["-Y", "sign", "-n", "warden-bundle", "-f", key], { input: bundleStatement(manifest), encoding: "utf8" }).stdout;
  const { delivery } = await openEmbeddedDelivery(join(home, "node"), { trust });
  try {
    const begun = await delivery.begin(manifest);
    for (const m of begun.missing) {
      const file = files.find((f) => sha256Digest(f.content) === m.digest)!;
      await delivery.putChunk(begun.stage_id, m.digest, 0, file.content);
    }
    await delivery.commit(begun.stage_id, [signature]);
    const stored = (await delivery.catalog.show("bench-signed")).revisions[0]!;

    // The policy check alone, as getManifest runs it (warm: file unchanged, signature verified once).
    const entrySignatures = [{ signature: stored.signatures[0]!.signature!, fingerprint: stored.signatures[0]!.fingerprint, key_type: "ssh-ed25519", principals: [], signed_at: Date.now() }];
    for (let i = 0; i < 100; i++) trust.checkAtUse(manifest, entrySignatures);
    const checkMs: number[] = [];
    for (let i = 0; i < CHECKS; i++) {
      const t0 = performance.now();
      trust.checkAtUse(manifest, entrySignatures);
      checkMs.push(performance.now() - t0);
    }
    // After a change to the file (every check re-reads and re-parses it once).
    const reloadMs: number[] = [];
    for (let i = 0; i < 20; i++) {
      writeFileSync(allowed, lines.join("\n") + "\n".repeat(1 + (i % 2)));
      const t0 = performance.now();
      trust.checkAtUse(manifest, entrySignatures);
      reloadMs.push(performance.now() - t0);
    }
    // Cold signature verification (a new policy object: no verified-signature cache).
    const coldMs: number[] = [];
    for (let i = 0; i < 20; i++) {
      const fresh = new TrustPolicy({ rules: [{ bundles: "bench-*", allowed_signers: allowed, any_of: ["publisher@example.com"] }] });
      fresh.checkAtUse(manifest, entrySignatures); // file parsed
      const t0 = performance.now();
      fresh.checkAtUse({ ...manifest, revision: manifest.revision }, entrySignatures);
      coldMs.push(performance.now() - t0);
    }

    // Materializations (each runs the check through getManifest), and the same without a policy.
    const materializer = new Materializer({ root: join(home, "mat"), source: delivery.reads });
    const matMs: number[] = [];
    for (let i = 0; i < MATERIALIZATIONS; i++) {
      const session = `s${String(i).padStart(4, "0")}`;
      const t0 = performance.now();
      await materializer.materialize({ provider: "claude", bundle: { bundle_id: "bench-signed", revision: "r1" }, session });
      matMs.push(performance.now() - t0);
      await materializer.cleanup(session);
    }
    const check = median(checkMs);
    const mat = median(matMs);
    console.log(`policy check per materialization (1,000 allowed signers, signer listed last): median ${fmt(check * 1000, 1)} µs, p99 ${fmt([...checkMs].sort((a, b) => a - b)[Math.floor(CHECKS * 0.99)]! * 1000, 1)} µs  (target < 1 ms: ${check < 1 ? "met" : "NOT met"})`);
    console.log(`materialization of a 17-file, 64 KiB bundle (policy check included): median ${fmt(mat, 2)} ms; the check is ${fmt((check / mat) * 100, 2)}% of it`);
    console.log(`first check after allowed_signers changed (re-read + parse 1,000 lines): median ${fmt(median(reloadMs), 2)} ms`);
    console.log(`check with a signature not verified before in this process (ed25519 verify): median ${fmt(median(coldMs) * 1000, 1)} µs`);
  } finally {
    await delivery.close();
  }
}
