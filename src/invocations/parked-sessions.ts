/**
 * A parked run's CLI session transcript, kept where every node of a fleet reads it (DESIGN.md
 * "Governed tool calls"): the node that answers an approval may not be the one that parked the
 * run, and the CLI resumes its session only from the transcript in its own run home.
 */

/** One transcript file: `<CLAUDE_CONFIG_DIR>/projects/<dir>/<session>.jsonl`. */
export interface SessionFile {
  /** the project directory's name (one path component) */
  readonly dir: string;
  readonly bytes: Uint8Array;
}

export interface ParkedSessionStore {
  /** Keeps (replacing) a parked run's transcript files. */
  put(runId: string, files: readonly SessionFile[]): Promise<void>;
  /** A parked run's transcript files; empty when none were kept. */
  get(runId: string): Promise<readonly SessionFile[]>;
  /** Forgets them (the run went on or ended). */
  remove(runId: string): Promise<void>;
}
