/**
 * JSON request bodies as RFC 8259 §8.1 has them: UTF-8. Fastify decodes a body with the
 * replacement character wherever its bytes are not UTF-8, so a client's broken text became a
 * different request (and a different request hash) without a word. Such a body is refused as
 * malformed; any other goes to fastify's own JSON parser, with its prototype-poisoning checks,
 * and a body that names one member twice in an object is refused too (core/json-duplicates.ts).
 */
import { isUtf8 } from "node:buffer";
import type { FastifyInstance } from "fastify";
import { ValidationError } from "../core/errors.js";
import { firstDuplicateName } from "../core/json-duplicates.js";

export function parseJsonBodiesAsUtf8(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (request, body, done) => {
    const bytes = body as Buffer;
    if (!isUtf8(bytes)) {
      done(new ValidationError("json-malformed", "the body is not UTF-8 text (RFC 8259 requires it of JSON)"), undefined);
      return;
    }
    const text = bytes.toString("utf8");
    parse(request, text, (error, value) => {
      if (error !== null && error !== undefined) return done(error, undefined);
      const duplicate = firstDuplicateName(text);
      if (duplicate !== undefined) {
        return done(new ValidationError("json-duplicate-name", `the body names ${JSON.stringify(duplicate)} twice in one object; say it once`), undefined);
      }
      done(null, value);
    });
  });
}
