/** Uploads in progress: each stage with the bytes received of those declared (Overview, Bundles). */
import type { UploadProgress } from "../client/wire.js";
import { formatBytes, shortDigest, Time } from "./ui.js";

export function UploadRows(props: { uploads: readonly UploadProgress[] }) {
  return (
    <ul class="uploads" aria-label="Uploads in progress">
      {props.uploads.map((u) => {
        const label = `${u.bundle_id}@${u.revision}`;
        return (
          <li data-stage={u.stage_id}>
            <div>
              <strong>{label}</strong>{" "}
              <span data-testid="upload-bytes">
                {formatBytes(u.bytes_received)} of {formatBytes(u.bytes_declared)}
              </span>{" "}
              <span class="muted">
                ({u.blobs_received} of {u.blobs} blobs; stage <code title={u.stage_id}>{u.stage_id.slice(0, 8)}</code>, manifest{" "}
                <code title={u.manifest_digest}>{shortDigest(u.manifest_digest)}</code>; last chunk <Time iso={u.last_active_at} />)
              </span>
            </div>
            <progress max={Math.max(u.bytes_declared, 1)} value={u.bytes_received} aria-label={`${label}: ${u.bytes_received} of ${u.bytes_declared} bytes received`} />
          </li>
        );
      })}
    </ul>
  );
}
