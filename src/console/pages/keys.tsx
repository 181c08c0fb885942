/**
 * Keys: the node's public signing keys, to copy or download as `warden journal verify --key FILE`
 * takes them, and its transparency log's verifier key as a C2SP tlog-policy file takes it
 * (`warden journal verify RUN --policy FILE`).
 */
import { useState } from "preact/hooks";
import { client } from "../api.js";
import { WardenHttpError } from "../../client/errors.js";
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
      <LogKey />
    </section>
  );
}

/** A policy an auditor starts from: the node's log key; witnesses are the auditor's to choose (their keys come from their operators, not from this node). */
function policyText(vkey: string, witnesses: readonly string[]): string {
  const lines = [`log ${vkey}`];
  if (witnesses.length > 0) lines.push(`# witnesses this node submits to: ${witnesses.join(", ")}; add "witness <name> <vkey>" for each you trust and name them in the quorum`);
  lines.push("quorum none");
  return `${lines.join("\n")}\n`;
}

function LogKey() {
  const status = useAsync(async () => {
    try {
      return await client.logStatus();
    } catch (error) {
      if (error instanceof WardenHttpError && error.code === "log-disabled") return null;
      throw error;
    }
  }, []);
  const [copied, setCopied] = useState(false);
  return (
    <section aria-labelledby="log-key-title">
      <h2 id="log-key-title">Transparency log</h2>
      {status.data === undefined ? (
        status.error !== undefined ? <ErrorBox error={status.error} /> : <Loading what="the log's key" />
      ) : status.data === null ? (
        <Empty>This node keeps no transparency log.</Empty>
      ) : (
        <>
          <p>
            Checkpoints of the log <code>{status.data.origin}</code> are signed with this verifier key. An auditor names it in a policy file (C2SP tlog-policy) to
            check a run was logged, on their own machine: <code>warden journal verify RUN --policy policy.txt</code>.
          </p>
          <pre class="output" data-testid="log-policy" tabIndex={0} aria-label="policy file">
            {policyText(status.data.vkey, status.data.witnesses.map((w) => w.name))}
          </pre>
          <button
            type="button"
            onClick={() => {
              void navigator.clipboard?.writeText(policyText(status.data!.vkey, status.data!.witnesses.map((w) => w.name))).then(() => setCopied(true));
            }}
          >
            {copied ? "Copied" : "Copy the policy"}
          </button>{" "}
          <a href={`data:text/plain;charset=utf-8,${encodeURIComponent(policyText(status.data.vkey, status.data.witnesses.map((w) => w.name)))}`} download="policy.txt">
            Download policy.txt
          </a>
          <p class="muted">
            Verifier key alone: <code class="break" data-testid="log-vkey">{status.data.vkey}</code>
          </p>
        </>
      )}
    </section>
  );
}
