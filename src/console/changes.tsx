/**
 * The Run page's Changes (DESIGN.md "Change sets"): the files a run changed and the hunks of its
 * patch, under the change-set digest the journal's `run.changes` signs — which the browser checks
 * itself: the manifest the node serves, in RFC 8785 form, must hash to that digest, and the patch
 * to the digest the manifest names, before either is shown as the run's.
 */
import { useEffect, useState } from "preact/hooks";
import canonicalizeImpl from "canonicalize";
import { client } from "./api.js";
import { hex } from "./verify.js";
import { visibleText } from "../core/visible-text.js";
import { ErrorBox, Loading } from "./ui.js";

const canonicalize = canonicalizeImpl as unknown as (input: unknown) => string | undefined;

/** Past this, the page lists the files and leaves the patch to `warden changes RUN`. */
const PATCH_SHOWN_BYTES = 2 * 1024 * 1024;

interface FileView {
  readonly path: string;
  readonly old_path: string | null;
  readonly status: string;
  readonly old_mode: string | null;
  readonly new_mode: string | null;
  readonly binary: boolean;
  readonly lines_added: number | null;
  readonly lines_deleted: number | null;
  readonly symlink_target: string | null;
}

interface ManifestView {
  readonly base: string;
  readonly files: readonly FileView[];
  readonly patch: { readonly sha256: string; readonly size: number };
}

/** The `run.changes` event of a journal, as the timeline received it. */
export interface RunChangesView {
  readonly base?: unknown;
  readonly change_set?: unknown;
  readonly files_total?: unknown;
  readonly error?: { readonly code?: unknown; readonly detail?: unknown };
}

async function sha256(bytes: Uint8Array): Promise<string> {
  return `sha256:${hex(await crypto.subtle.digest("SHA-256", bytes))}`;
}

/** One file's part of a git patch: its header lines and its hunks, each `@@` line with the lines under it. */
export interface PatchSection {
  readonly header: readonly string[];
  readonly hunks: readonly { readonly head: string; readonly lines: readonly string[] }[];
}

/** Splits a `git diff` patch at its `diff --git` lines, and each part at its `@@` lines. */
export function splitPatch(text: string): PatchSection[] {
  const sections: { header: string[]; hunks: { head: string; lines: string[] }[] }[] = [];
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  for (const line of lines) {
    if (line.startsWith("diff --git ")) sections.push({ header: [line], hunks: [] });
    const section = sections.at(-1);
    if (section === undefined || line.startsWith("diff --git ")) continue;
    if (line.startsWith("@@")) section.hunks.push({ head: line, lines: [] });
    else if (section.hunks.length > 0) section.hunks.at(-1)!.lines.push(line);
    else section.header.push(line);
  }
  return sections;
}

interface Loaded {
  readonly manifest: ManifestView;
  readonly digestOk: boolean;
  readonly digest: string;
  readonly patch: { readonly sections: PatchSection[] } | { readonly skipped: string };
}

async function load(runId: string, signed: string): Promise<Loaded> {
  const served = await client.runChanges(runId);
  const text = canonicalize(served.manifest);
  if (text === undefined) throw new Error("the node served a manifest that is not JSON");
  const digest = await sha256(new TextEncoder().encode(text));
  const manifest = served.manifest as ManifestView;
  if (digest !== signed) return { manifest, digestOk: false, digest, patch: { skipped: "the manifest does not match the signed digest" } };
  if (manifest.patch.size > PATCH_SHOWN_BYTES) return { manifest, digestOk: true, digest, patch: { skipped: `the patch is ${manifest.patch.size} bytes; see it with warden changes` } };
  const bytes = await client.runChangeBlob(runId, manifest.patch.sha256);
  if ((await sha256(bytes)) !== manifest.patch.sha256) return { manifest, digestOk: true, digest, patch: { skipped: "the patch the node served does not match its digest" } };
  return { manifest, digestOk: true, digest, patch: { sections: splitPatch(new TextDecoder().decode(bytes)) } };
}

function lineClass(line: string): string {
  return line.startsWith("+") ? "diff-add" : line.startsWith("-") ? "diff-del" : "diff-ctx";
}

function FileRow(props: { file: FileView }) {
  const f = props.file;
  const mode = f.old_mode !== null && f.new_mode !== null && f.old_mode !== f.new_mode ? `${f.old_mode} → ${f.new_mode}` : "";
  return (
    <tr data-testid="changed-file" data-status={f.status}>
      <td class={`change-${f.status}`}>{f.status}</td>
      <td class="mono">{visibleText(f.old_path === null ? f.path : `${f.old_path} → ${f.path}`)}</td>
      <td class="mono small">
        {f.binary ? "binary" : f.lines_added === null ? "—" : (
          <>
            <span class="diff-add">+{f.lines_added}</span> <span class="diff-del">−{f.lines_deleted}</span>
          </>
        )}
      </td>
      <td class="mono small">{[mode, f.symlink_target === null ? "" : `symlink → ${visibleText(f.symlink_target)}`].filter((s) => s !== "").join("; ") || ""}</td>
    </tr>
  );
}

export function Changes(props: { runId: string; event: RunChangesView | undefined }) {
  const signed = typeof props.event?.change_set === "string" ? props.event.change_set : undefined;
  const [state, setState] = useState<{ data?: Loaded; error?: unknown }>({});
  useEffect(() => {
    if (signed === undefined) return undefined;
    let current = true;
    setState({});
    load(props.runId, signed).then(
      (data) => current && setState({ data }),
      (error: unknown) => current && setState({ error }),
    );
    return () => void (current = false);
  }, [props.runId, signed]);
  if (props.event === undefined) return null;
  return (
    <section aria-labelledby="changes-title" data-testid="changes">
      <h2 id="changes-title">Changes</h2>
      {props.event.error !== undefined ? (
        <p data-testid="changes-error">
          The change set could not be made: <code class="code">{String(props.event.error.code)}</code> {String(props.event.error.detail)}
        </p>
      ) : (
        <>
          <p>
            Change set <code class="mono small" data-testid="change-set-digest">{signed}</code> on base <code class="mono small">{String(props.event.base)}</code>
            {" — "}
            {state.data === undefined ? null : state.data.digestOk ? (
              <span class="badge badge-ok" role="status" data-testid="changes-badge">
                ✓ the served change set hashes to the digest the journal signs
              </span>
            ) : (
              <span class="badge badge-bad" role="status" data-testid="changes-badge">
                ✗ the served change set hashes to {state.data.digest}, not the signed digest
              </span>
            )}
          </p>
          {state.error !== undefined && <ErrorBox error={state.error} title="The change set could not be read" />}
          {state.data === undefined && state.error === undefined && <Loading what="the change set" />}
          {state.data !== undefined && (
            <>
              {state.data.manifest.files.length === 0 ? (
                <p class="muted" data-testid="no-changes">The run changed nothing.</p>
              ) : (
                <table class="changes">
                  <thead>
                    <tr>
                      <th scope="col">Change</th>
                      <th scope="col">Path</th>
                      <th scope="col">Lines</th>
                      <th scope="col">Mode, link</th>
                    </tr>
                  </thead>
                  <tbody>
                    {state.data.manifest.files.map((f) => (
                      <FileRow file={f} />
                    ))}
                  </tbody>
                </table>
              )}
              {"skipped" in state.data.patch ? (
                <p class="muted">Patch not shown: {state.data.patch.skipped}.</p>
              ) : (
                state.data.patch.sections.map((section) => (
                  <details open class="patch-file" data-testid="patch-file">
                    <summary class="mono small">{visibleText(section.header[0]?.replace(/^diff --git /, "") ?? "")}</summary>
                    {section.header.length > 1 && <pre class="diff diff-header">{visibleText(section.header.slice(1).join("\n"))}</pre>}
                    {section.hunks.map((hunk) => (
                      <pre class="diff" data-testid="hunk" tabIndex={0}>
                        <span class="diff-hunk">{visibleText(hunk.head)}</span>
                        {"\n"}
                        {hunk.lines.map((line) => (
                          <span class={lineClass(line)}>
                            {visibleText(line)}
                            {"\n"}
                          </span>
                        ))}
                      </pre>
                    ))}
                  </details>
                ))
              )}
            </>
          )}
        </>
      )}
    </section>
  );
}
