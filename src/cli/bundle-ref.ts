/**
 * A bundle named on the command line as `id[@revision]`. Without a revision the latest live
 * (not retired) revision the node lists is meant: that is what an operator just pushed.
 */
import { NotFoundError, ValidationError } from "../core/errors.js";
import type { WardenClient } from "../client/client.js";

export interface BundleRef {
  readonly bundle_id: string;
  readonly revision: string;
}

export function splitBundleRef(text: string): { bundle_id: string; revision?: string } {
  const at = text.lastIndexOf("@");
  const bundleId = at < 0 ? text : text.slice(0, at);
  const revision = at < 0 ? undefined : text.slice(at + 1);
  if (bundleId === "" || revision === "") {
    throw new ValidationError("bundle-ref-invalid", `${JSON.stringify(text)} is not a bundle reference: write <bundle-id> or <bundle-id>@<revision>`);
  }
  return revision === undefined ? { bundle_id: bundleId } : { bundle_id: bundleId, revision };
}

export async function resolveBundleRef(client: WardenClient, text: string): Promise<BundleRef> {
  const ref = splitBundleRef(text);
  if (ref.revision !== undefined) return { bundle_id: ref.bundle_id, revision: ref.revision };
  const view = await client.getBundle(ref.bundle_id);
  const live = view.revisions.filter((r) => !r.retired);
  const latest = live[live.length - 1];
  if (latest === undefined) {
    throw new NotFoundError("revision-not-found", `bundle ${JSON.stringify(ref.bundle_id)} has no live revision`, { details: { bundle_id: ref.bundle_id } });
  }
  return { bundle_id: ref.bundle_id, revision: latest.revision };
}
