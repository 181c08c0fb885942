/**
 * What warden's postgres connections make of what the server sends. int8 values: a number exactly when it is one; past 2^53 a
 * damaged record (500, which no client retries), never a rounded number and never a 503 that
 * sends callers into retries of a value that will not change. Reads whose rows are checked one
 * by one get the text instead, for the row's own check to refuse it by name.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { openPool, pgFailure, query, ROW_CHECKED_TYPES, type PgPool } from "../../src/backends/postgres/connection.js";
import { isWardenError } from "../../src/core/errors.js";
import { startTestPostgres, type TestPostgres } from "../support/postgres.js";

let server: TestPostgres;
let pool: PgPool;

before(async () => {
  server = await startTestPostgres();
  pool = openPool({ url: await server.createDatabase("int8") }, 2);
});
after(async () => {
  await pool?.end();
  await server?.stop();
});

const PAST_EXACT = "1152921504606846976"; // 2^60

test("an int8 within 2^53 arrives as a number; past it, a damaged-record error of status 500", async () => {
  const fits = await query<{ v: unknown }>(pool, "read a number", { text: `SELECT ${Number.MAX_SAFE_INTEGER}::int8 AS v` });
  assert.equal(fits.rows[0]!.v, Number.MAX_SAFE_INTEGER);
  await assert.rejects(
    query(pool, "read a number", { text: `SELECT ${PAST_EXACT}::int8 AS v` }),
    (e: unknown) => isWardenError(e) && e.code === "database-value-out-of-range" && e.status === 500 && e.message.includes(PAST_EXACT),
  );
  // The connection is still good for the next statement.
  assert.equal((await query<{ v: unknown }>(pool, "read a number", { text: "SELECT 7::int8 AS v" })).rows[0]!.v, 7);
});

test("row-checked reads get such a value as its text", async () => {
  const rows = await query<{ v: unknown; w: unknown }>(pool, "read numbers", { text: `SELECT ${PAST_EXACT}::int8 AS v, 5::int8 AS w`, types: ROW_CHECKED_TYPES });
  assert.deepEqual(rows.rows[0], { v: PAST_EXACT, w: 5 });
});

test("refused credentials are database-auth-failed, saying where a password goes, not an outage or a failed migration", () => {
  const refusals = [
    Object.assign(new Error('password authentication failed for user "warden"'), { code: "28P01" }),
    Object.assign(new Error('role "nobody" is not permitted to log in'), { code: "28000" }),
    // pg's own refusal when the server asks for a password the URL does not hold
    new Error("SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string"),
  ];
  for (const refusal of refusals) {
    const failure = pgFailure(refusal, "migrate the database schema");
    assert.equal(failure.code, "database-auth-failed", failure.message);
    assert.match(failure.message, /PGPASSWORD/);
    assert.doesNotMatch(failure.message, /migrate/);
  }
  assert.equal(pgFailure(Object.assign(new Error("syntax error"), { code: "42601" }), "read").code, "database-error");
});

test("every pooled connection is configured by SET, not by a startup parameter a pooler refuses", async () => {
  const configured = openPool({ url: await server.createDatabase("settings"), statementTimeoutMs: 1234 }, 2);
  try {
    // Two connections at once: each new one is configured before it is handed out.
    const [a, b] = await Promise.all([configured.connect(), configured.connect()]);
    try {
      for (const client of [a, b]) {
        const rows = (await client.query<{ t: string; s: string }>("SELECT current_setting('statement_timeout') AS t, current_setting('synchronous_commit') AS s")).rows[0]!;
        assert.deepEqual([rows.t, rows.s], ["1234ms", "on"]);
      }
      // A startup `options` parameter would show as the session's source; SET shows as "session".
      const source = (await a.query<{ source: string }>("SELECT source FROM pg_settings WHERE name = 'statement_timeout'")).rows[0]!.source;
      assert.equal(source, "session");
    } finally {
      a.release();
      b.release();
    }
  } finally {
    await configured.end();
  }
});
