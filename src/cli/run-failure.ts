/**
 * What `warden invoke` shows of a run that failed, beside its result: the tool calls that failed
 * (from the run's journal; the refused ones are in the result already) and the end of what the
 * agent printed on stderr (`GET /v1/runs/{id}/output/stderr?tail=N`), so "exit code 2" comes with
 * its reason.
 */
import type { WardenClient } from "../client/client.js";

export interface RunFailure {
  /** `<tool>: <why>` of each tool call the journal records as failed, not refused */
  readonly failedTools: readonly string[];
  /** the last bytes of the agent's stderr ("" when it printed nothing there) */
  readonly stderr: string;
}

/** Enough for the last lines of an error and its stack's first frames. */
const STDERR_TAIL_BYTES = 4096;

/**
 * Fetches both from the node. Best effort: a part the node cannot give (the output pruned, the run
 * on another node of a fleet) is left out, never a failure of the command that printed the result.
 */
export async function fetchRunFailure(client: WardenClient, runId: string): Promise<RunFailure> {
  const [journal, stderr] = await Promise.all([
    client.journal(runId).catch(() => undefined),
    client.runOutput(runId, "stderr", { tailBytes: STDERR_TAIL_BYTES }).catch(() => undefined),
  ]);
  return { failedTools: journal === undefined ? [] : failedTools(Buffer.from(journal).toString("utf8")), stderr: stderr?.text ?? "" };
}

interface EventLike {
  readonly type?: unknown;
  readonly effect_id?: unknown;
  readonly kind?: unknown;
  readonly name?: unknown;
  readonly outcome?: unknown;
  readonly detail?: { readonly refused?: unknown; readonly exit_code?: unknown; readonly reason?: unknown; readonly is_error?: unknown };
}

/** The failed, not refused, tool calls of a journal's lines (`{"entry": {"event": …}, …}`), in order. */
export function failedTools(journal: string): string[] {
  const names = new Map<string, string>();
  const out: string[] = [];
  for (const line of journal.split("\n")) {
    let event: EventLike | undefined;
    try {
      event = (JSON.parse(line) as { entry?: { event?: EventLike } }).entry?.event;
    } catch {
      continue; // the CLI shows; `warden journal verify` is what checks
    }
    if (event === undefined || typeof event.effect_id !== "string") continue;
    if (event.type === "effect.started" && event.kind === "tool") names.set(event.effect_id, String(event.name));
    const name = names.get(event.effect_id);
    if (event.type !== "effect.finished" || name === undefined || event.outcome !== "failed" || event.detail?.refused !== undefined) continue;
    const d = event.detail ?? {};
    const why = typeof d.exit_code === "number" ? `exit ${d.exit_code}` : typeof d.reason === "string" ? d.reason : "reported an error";
    out.push(`${name}: ${why}`);
  }
  return out;
}
