/** Polling for tests that wait on another process: a node, an agent, a database. */

/**
 * The longest a test waits for something it observes (a line, a socket, a file, a status) before
 * it fails, naming what it waited for. Sized for a busy machine (load 8 on 2 cores, where a node
 * started under tsx takes tens of seconds to print its URL instead of one), so that reaching it
 * means the awaited thing is not coming, not that the machine was slow.
 */
export const READY_MS = 300_000;

/**
 * The time limit of a whole test that runs many processes one after another (crash loops, races):
 * a guard against a hang only, several times what such a test takes on a busy machine.
 */
export const LONG_TEST_MS = 900_000;

/** Polls `probe` every `every` ms until it answers something other than undefined; throws after `ms`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, ms = READY_MS, every = 50): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${Math.round(ms / 1000)} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, every));
  }
}
