/**
 * Which methods the registered routes answer for a concrete path, so a request with another method
 * gets 405 with an `Allow` header (RFC 9110 §15.5.6) instead of a 404 that says the resource does
 * not exist. Route templates are fastify's: `:name` matches one non-empty segment, a trailing `*`
 * matches the rest.
 */
export class AllowedMethods {
  readonly #routes: { readonly method: string; readonly segments: readonly string[] }[] = [];

  add(method: string | readonly string[], url: string): void {
    const segments = url.split("/");
    for (const m of typeof method === "string" ? [method] : method) this.#routes.push({ method: m.toUpperCase(), segments });
  }

  /** The methods some route answers for `path` (no query), sorted; empty when no route matches it. */
  for(path: string): string[] {
    const segments = path.split("/");
    const methods = new Set<string>();
    for (const route of this.#routes) if (matches(route.segments, segments)) methods.add(route.method);
    return [...methods].sort();
  }
}

function matches(template: readonly string[], path: readonly string[]): boolean {
  for (let i = 0; i < template.length; i++) {
    const t = template[i]!;
    if (t === "*" && i === template.length - 1) return true;
    const p = path[i];
    if (p === undefined) return false;
    if (t.startsWith(":") ? p === "" : t !== p) return false;
  }
  return template.length === path.length;
}
