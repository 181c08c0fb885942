/** Polling for tests that wait on another process: a node, an agent, a database. */

/** Polls `probe` every `every` ms until it answers something other than undefined; throws after `ms`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, ms = 15_000, every = 50): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, every));
  }
}
