/**
 * Bundles: the catalog, each revision's manifest as a file tree, which providers it
 * materializes for, and retiring a revision with a confirmation that says what GC frees.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { client } from "../api.js";
import type { BundleView, Manifest, RevisionView } from "../../client/wire.js";
import { href, Link } from "../router.js";
import { Empty, ErrorBox, formatBytes, Loading, shortDigest, Time, useAsync } from "../ui.js";
import { UploadRows } from "../uploads.js";

/** Blobs only `revision` references among the live revisions of every bundle: what GC deletes once it is retired. */
function freedBy(all: readonly BundleView[], bundleId: string, revision: RevisionView): { blobs: number; bytes: number } {
  const elsewhere = new Set<string>();
  for (const bundle of all) {
    for (const r of bundle.revisions) {
      if (r.retired || (bundle.bundle_id === bundleId && r.revision === revision.revision)) continue;
      for (const blob of r.receipt.blobs) elsewhere.add(blob.digest);
    }
  }
  let blobs = 0;
  let bytes = 0;
  for (const blob of revision.receipt.blobs) {
    if (elsewhere.has(blob.digest)) continue;
    blobs++;
    bytes += blob.byte_len;
  }
  return { blobs, bytes };
}

/** Uploads move fast: their progress is asked for every second. */
const UPLOADS_POLL_MS = 1000;

export function Bundles(props: { operator: boolean; selected?: string }) {
  const bundles = useAsync(() => client.listBundles(), []);
  const uploads = useAsync(() => client.listStages(), [], UPLOADS_POLL_MS);
  // An upload that leaves the list was committed (a new revision) or aborted: read the catalog again.
  const uploading = uploads.data?.map((u) => u.stage_id).join(" ");
  const seen = useRef(uploading);
  useEffect(() => {
    if (seen.current !== undefined && uploading !== seen.current) bundles.reload();
    seen.current = uploading;
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [uploading]);
  if (bundles.data === undefined) return bundles.error !== undefined ? <ErrorBox error={bundles.error} /> : <Loading what="bundles" />;
  const all = bundles.data;
  const shown = props.selected === undefined ? all : all.filter((b) => b.bundle_id === props.selected);
  return (
    <section aria-labelledby="bundles-title">
      <h1 id="bundles-title">Bundles</h1>
      {uploads.data !== undefined && uploads.data.length > 0 && (
        <section aria-labelledby="uploads-title">
          <h2 id="uploads-title">Uploads in progress</h2>
          <UploadRows uploads={uploads.data} />
        </section>
      )}
      {uploads.error !== undefined && <ErrorBox error={uploads.error} title="Uploads in progress" />}
      {all.length === 0 ? (
        <Empty>
          No bundle is delivered to this node yet. Push a directory of skills, a plugin manifest or MCP servers with <code>warden push ./my-bundle</code>.
        </Empty>
      ) : (
        shown.map((bundle) => (
          <article class="bundle" aria-labelledby={`b-${bundle.bundle_id}`}>
            <h2 id={`b-${bundle.bundle_id}`}>
              <Link href={href.bundle(bundle.bundle_id)}>{bundle.bundle_id}</Link>
            </h2>
            <ul class="revisions">
              {bundle.revisions.map((revision) => (
                <Revision bundleId={bundle.bundle_id} revision={revision} freed={freedBy(all, bundle.bundle_id, revision)} operator={props.operator} onRetired={bundles.reload} />
              ))}
            </ul>
          </article>
        ))
      )}
    </section>
  );
}

function Revision(props: { bundleId: string; revision: RevisionView; freed: { blobs: number; bytes: number }; operator: boolean; onRetired: () => void }) {
  const { bundleId, revision } = props;
  const [open, setOpen] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [collected, setCollected] = useState<number | undefined>(undefined);
  const label = `${bundleId}@${revision.revision}`;
  const retire = async (): Promise<void> => {
    setError(undefined);
    try {
      const reply = await client.retireRevision(bundleId, revision.revision);
      setCollected(reply.collected_blobs);
      setConfirming(false);
      props.onRetired();
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <li class="revision" data-revision={revision.revision}>
      <div class="rev-head">
        <strong>{revision.revision}</strong> {revision.retired ? <span class="status status-retired">retired</span> : <span class="status status-recorded">live</span>} committed{" "}
        <Time iso={revision.committed_at} />, {revision.receipt.blobs.length} blobs, manifest <code title={revision.manifest_digest}>{shortDigest(revision.manifest_digest)}</code>
      </div>
      <div class="actions">
        <button type="button" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? "Hide files" : "Files"}
        </button>
        {props.operator && !revision.retired && !confirming && (
          <button type="button" class="danger" onClick={() => setConfirming(true)}>
            Retire…
          </button>
        )}
      </div>
      {confirming && (
        <div class="confirm" role="alertdialog" aria-labelledby={`confirm-${label}`}>
          <p id={`confirm-${label}`}>
            Retire {label}? New sessions will refuse it (it stays listed), and garbage collection then deletes {props.freed.blobs} blob
            {props.freed.blobs === 1 ? "" : "s"} ({formatBytes(props.freed.bytes)}) that no other live revision uses.
          </p>
          <button type="button" class="danger" onClick={() => void retire()}>
            Retire {label}
          </button>{" "}
          <button type="button" onClick={() => setConfirming(false)}>
            Cancel
          </button>
        </div>
      )}
      {collected !== undefined && <p role="status">Retired; {collected} blob{collected === 1 ? "" : "s"} deleted.</p>}
      {error !== undefined && <ErrorBox error={error} />}
      {open && <ManifestTree bundleId={bundleId} revision={revision.revision} />}
    </li>
  );
}

/**
 * What each provider would get from the revision, asked from the node's materializer (the same
 * planning a run does, nothing written), or the refusal a run with it would answer.
 */
function Providers(props: { bundleId: string; revision: string }) {
  const plans = useAsync(() => client.revisionProviders(props.bundleId, props.revision), [props.bundleId, props.revision]);
  if (plans.data === undefined) return plans.error !== undefined ? <ErrorBox error={plans.error} title="Providers" /> : <Loading what="what each provider gets" />;
  const providers = plans.data.providers;
  const usable = providers.filter((p) => p.materializes).map((p) => p.provider);
  return (
    <div class="providers">
      <p>Materializes for: {usable.length === 0 ? "no provider" : usable.join(", ")}</p>
      <ul>
        {providers.map((p) =>
          p.materializes ? (
            <li data-provider={p.provider}>
              <strong>{p.provider}</strong>: {p.files.length} file{p.files.length === 1 ? "" : "s"} ({describeFiles(p.files)})
            </li>
          ) : (
            <li data-provider={p.provider}>
              <strong>{p.provider}</strong>: refused, <code>{p.code}</code>: {p.detail}
            </li>
          ),
        )}
      </ul>
    </div>
  );
}

/** The planned tree in a few words: the top directories the bundle's files land in, and what warden generates. */
function describeFiles(files: readonly ({ target: string; path: string } | { target: string; generated: true })[]): string {
  const dirs = new Map<string, number>();
  const generated: string[] = [];
  for (const f of files) {
    if ("generated" in f) {
      generated.push(`${f.target} generated`);
      continue;
    }
    const top = f.target.split("/").slice(0, -1).slice(0, 2).join("/");
    dirs.set(top, (dirs.get(top) ?? 0) + 1);
  }
  return [...[...dirs].map(([dir, n]) => `${n} in ${dir}/`), ...generated].join(", ");
}

function ManifestTree(props: { bundleId: string; revision: string }) {
  const manifest = useAsync(() => client.bundleManifest(props.bundleId, props.revision), [props.bundleId, props.revision]);
  if (manifest.data === undefined) return manifest.error !== undefined ? <ErrorBox error={manifest.error} /> : <Loading what="the manifest" />;
  const m = manifest.data;
  const skills = m.components.filter((c) => c.kind === "skill" && c.relative_path.endsWith("/SKILL.md")).map((c) => c.relative_path.split("/")[1]);
  const total = m.components.reduce((n, c) => n + c.blob.byte_len, 0);
  return (
    <div class="manifest">
      <p>
        {m.components.length} files, {formatBytes(total)}; skills: {skills.length === 0 ? "none" : skills.join(", ")}; plugin manifest:{" "}
        {m.components.some((c) => c.kind === "plugin-manifest") ? "yes" : "no"}; MCP servers: {m.components.some((c) => c.kind === "mcp-declaration") ? "declared in .mcp.json" : "none"}
      </p>
      <Providers bundleId={props.bundleId} revision={props.revision} />
      <table>
        <caption class="sr-only">Files of {props.bundleId}@{props.revision}</caption>
        <thead>
          <tr>
            <th scope="col">Path</th>
            <th scope="col" class="wide">Kind</th>
            <th scope="col">Size</th>
            <th scope="col" class="wide">Digest</th>
          </tr>
        </thead>
        <tbody>
          {m.components.map((c) => (
            <tr>
              <td class="path">
                <span class="indent">{"  ".repeat(c.relative_path.split("/").length - 1)}</span>
                {c.relative_path}
              </td>
              <td class="wide">
                {c.kind} ({c.scope})
              </td>
              <td>{formatBytes(c.blob.byte_len)}</td>
              <td class="wide">
                <code title={c.blob.digest}>{shortDigest(c.blob.digest)}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
