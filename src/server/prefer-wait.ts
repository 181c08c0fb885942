/** `Prefer: wait=<seconds>` (RFC 7240): how long a POST may wait for the run it started. */

/** Milliseconds to wait, capped at `maxWaitS`; 0 without a (valid) wait preference. */
export function preferredWaitMs(header: string | undefined, maxWaitS: number): number {
  if (header === undefined) return 0;
  for (const part of header.split(/[,;]/)) {
    const match = /^\s*wait\s*=\s*"?(\d{1,9})"?\s*$/i.exec(part);
    if (match !== null) return Math.min(Number(match[1]), maxWaitS) * 1000;
  }
  return 0;
}

/**
 * `Prefer: respond-async` (RFC 7240 §4.1) without `wait`: submit to the queue and answer at once.
 * With a `wait` too, the caller asked to wait for the result, as clients did before the queue: the
 * run starts now and the wait applies (DESIGN.md "Queued invocations").
 */
export function prefersAsync(header: string | undefined): boolean {
  if (header === undefined) return false;
  const parts = header.split(/[,;]/);
  return parts.some((part) => /^\s*respond-async\s*$/i.test(part)) && !parts.some((part) => /^\s*wait\s*=/i.test(part));
}

export type Settled<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

/**
 * The settlement of `promise` if it comes within `ms`, else undefined. `cancellers` lets the
 * server stop the wait early at shutdown (the caller then gets the 202 answer).
 */
export async function settleWithin<T>(promise: Promise<T>, ms: number, cancellers: Set<() => void>): Promise<Settled<T> | undefined> {
  let timer: NodeJS.Timeout | undefined;
  let cancel: (() => void) | undefined;
  const expired = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
    cancel = () => resolve(undefined);
    cancellers.add(cancel);
  });
  try {
    return await Promise.race([
      promise.then(
        (value): Settled<T> => ({ ok: true, value }),
        (error: unknown): Settled<T> => ({ ok: false, error }),
      ),
      expired,
    ]);
  } finally {
    clearTimeout(timer);
    if (cancel !== undefined) cancellers.delete(cancel);
  }
}
