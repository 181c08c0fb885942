/** Runs `worker` over `items` with at most `concurrency` in flight; the first failure stops new starts and is thrown. */
export async function forEachConcurrent<T>(items: readonly T[], concurrency: number, worker: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  const lane = async (): Promise<void> => {
    while (!failed && next < items.length) {
      const item = items[next++]!;
      try {
        await worker(item);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  const lanes = Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, lane);
  const settled = await Promise.allSettled(lanes);
  const rejected = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (rejected !== undefined) throw rejected.reason;
}
