/** Keys: the node's public signing keys, to copy or download as `warden journal verify --key FILE` takes them. */
import { useState } from "preact/hooks";
import { client } from "../api.js";
import { Empty, ErrorBox, Loading, useAsync } from "../ui.js";

export function Keys() {
  const keys = useAsync(() => client.keys(), []);
  const [copied, setCopied] = useState<string | undefined>(undefined);
  if (keys.data === undefined) return keys.error !== undefined ? <ErrorBox error={keys.error} /> : <Loading what="keys" />;
  return (
    <section aria-labelledby="keys-title">
      <h1 id="keys-title">Keys</h1>
      <p>
        Every journal and receipt this node writes is signed with one of these Ed25519 keys. To check a journal anywhere:{" "}
        <code>warden journal verify journal.jsonl --key KEY_FILE</code>.
      </p>
      {keys.data.length === 0 ? (
        <Empty>The node has no key yet: it creates one on its first run.</Empty>
      ) : (
        <table class="keys">
          <caption class="sr-only">Public keys</caption>
          <thead>
            <tr>
              <th scope="col">Key id</th>
              <th scope="col">Public key (base64 of the raw 32 bytes)</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {keys.data.map((key) => (
              <tr>
                <td>
                  <code>{key.key_id}</code>
                </td>
                <td class="mono break">{key.public_key}</td>
                <td class="actions">
                  <button
                    type="button"
                    onClick={() => {
                      void navigator.clipboard?.writeText(key.public_key).then(() => setCopied(key.key_id));
                    }}
                    aria-label={`Copy key ${key.key_id}`}
                  >
                    {copied === key.key_id ? "Copied" : "Copy"}
                  </button>{" "}
                  <a href={`data:text/plain;charset=utf-8,${encodeURIComponent(`${key.public_key}\n`)}`} download={`warden-${key.key_id}.pub`}>
                    Download<span class="sr-only"> key {key.key_id}</span>
                  </a>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
