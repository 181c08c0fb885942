/**
 * Fills a home with many recorded invocations fast, straight into the embedded store (one real
 * recorded run, then copies of its claim under new ids, see src/invocations/seed.ts): for tests
 * and benchmarks that need a big store, not a thousand agent runs. The home must not be served
 * while this runs.
 */
import { randomUUID } from "node:crypto";
import { openEmbeddedBackend } from "../../src/backends/embedded/index.js";
import { Invocations, recordedCopies } from "../../src/invocations/index.js";

export async function seedRecordedClaims(home: string, count: number, scope = "api:seed"): Promise<{ scope: string; templateId: string }> {
  const backend = await openEmbeddedBackend({ home });
  try {
    const invocations = new Invocations({ claims: backend.claims, journals: backend.journals, keys: backend.keys, limits: backend.limits });
    const templateId = randomUUID();
    await invocations.run(scope, templateId, { provider: "claude", prompt: "seed" }, "seed", async (h) => {
      await h.effect({ kind: "tool", name: "noop", fingerprint: "seed" }, () => 1);
      return { ok: true };
    });
    const template = await backend.claims.get({ scope, id: templateId });
    if (template === undefined) throw new Error("the template claim is missing");
    if (count > 1) backend.claims.importRecorded(recordedCopies(template, count - 1));
    return { scope, templateId };
  } finally {
    await backend.close();
  }
}
