/**
 * The server is a thin adapter over the facade (DESIGN.md "Architecture"): its routes call
 * `Warden`'s methods, never the services behind it. Most of those are private fields (the compiler
 * refuses a reach-through); `invocations` is public as the library's claims API, so this reads the
 * server's sources for a reach-through the compiler would let pass.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const SERVER = fileURLToPath(new URL("../../src/server/", import.meta.url));
/** `warden.invocations.list(...)`, `ctx.warden.delivery.gc()`, `const { delivery } = warden`... */
const SERVICES = ["invocations", "delivery", "runner", "materializer", "journals", "fleet"];
const REACH = new RegExp(`\\bwarden\\s*\\.\\s*(${SERVICES.join("|")})\\b|\\{[^}]*\\b(${SERVICES.join("|")})\\b[^}]*\\}\\s*=\\s*(ctx\\.)?warden\\b`, "g");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith(".ts") ? [join(dir, entry.name)] : [],
  );
}

describe("one door", () => {
  it("no server module reaches through the facade to its services", () => {
    const files = sources(SERVER);
    assert.ok(files.length > 10, `read the server's sources under ${SERVER}`);
    const found = files.flatMap((file) =>
      [...readFileSync(file, "utf8").matchAll(REACH)].map((m) => `${relative(SERVER, file)}: ${m[0]}`),
    );
    assert.deepEqual(found, []);
  });
});
