/**
 * Manifests stored as canonical JSON text in stage and commit rows. A stored manifest is trusted
 * only after its digest is recomputed and matches the digest it is stored under; the check runs
 * once per digest per process (a verified manifest is immutable), not on every chunk.
 */
import { digestEquals } from "../../core/digest.js";
import { IntegrityError } from "../../core/errors.js";
import { manifestDigestOf, type Manifest } from "../../delivery/manifest-types.js";

const CACHE_LIMIT = 1024;

export class ManifestCache {
  readonly #verified = new Map<string, Manifest>();

  /** The manifest stored as `text` under `digest`, or IntegrityError `delivery-record-corrupt`. */
  verified(digest: string, text: string, where: string): Manifest {
    const cached = this.#verified.get(digest);
    if (cached !== undefined) return cached;
    let manifest: Manifest;
    try {
      manifest = JSON.parse(text) as Manifest;
    } catch {
      throw corrupt(where);
    }
    if (typeof manifest !== "object" || manifest === null || manifest.manifest_digest !== digest || !digestEquals(manifestDigestOf(manifest), digest)) {
      throw corrupt(where);
    }
    if (this.#verified.size >= CACHE_LIMIT) this.#verified.delete(this.#verified.keys().next().value!);
    this.#verified.set(digest, manifest);
    return manifest;
  }
}

function corrupt(where: string): IntegrityError {
  return new IntegrityError("delivery-record-corrupt", `the stored manifest of ${where} does not match its digest`, { status: 500 });
}
