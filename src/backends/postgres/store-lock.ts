/**
 * Delivery's store-wide steps (begin, gc, start-up recovery) exclude each other in one process
 * through the service's lock table; on a shared database they must also exclude the same steps of
 * every other node. Otherwise gc on one node can delete a blob that begin on another just counted
 * as stored, and that stage's commit fails for want of it.
 *
 * The step holds a session-level advisory lock on a pooled connection for its duration. A node
 * that dies, or a connection that breaks, ends the session and so releases the lock; nothing
 * waits on a timeout. The two-int form keeps it apart from the owner locks (bigint keys, owner.ts).
 * Each process asks for at most one at a time (the service serializes its own steps first), so a
 * step's own statements always find a free pooled connection.
 */
import { pgFailure, withPooledClient, type PgPool } from "./connection.js";

/** "ward" */
const LOCK_CLASS = 0x77617264;
const DELIVERY_STORE = 1;

export function deliveryStoreLock(pool: PgPool): <T>(step: () => Promise<T>) => Promise<T> {
  return <T>(step: () => Promise<T>): Promise<T> =>
    withPooledClient(pool, "lock the delivery store", async (client, broke) => {
      try {
        await client.query("SELECT pg_advisory_lock($1, $2)", [LOCK_CLASS, DELIVERY_STORE]);
      } catch (error) {
        broke();
        throw pgFailure(error, "lock the delivery store");
      }
      try {
        return await step();
      } finally {
        try {
          await client.query("SELECT pg_advisory_unlock($1, $2)", [LOCK_CLASS, DELIVERY_STORE]);
        } catch {
          // The session is gone, and its lock with it; the connection is not reused.
          broke();
        }
      }
    });
}
