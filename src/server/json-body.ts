/**
 * JSON request bodies as RFC 8259 §8.1 has them: UTF-8. Fastify decodes a body with the
 * replacement character wherever its bytes are not UTF-8, so a client's broken text became a
 * different request (and a different request hash) without a word. Such a body is refused as
 * malformed; any other goes to fastify's own JSON parser, with its prototype-poisoning checks.
 */
import { isUtf8 } from "node:buffer";
import type { FastifyInstance } from "fastify";
import { ValidationError } from "../core/errors.js";

export function parseJsonBodiesAsUtf8(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (request, body, done) => {
    const bytes = body as Buffer;
    if (!isUtf8(bytes)) {
      done(new ValidationError("json-malformed", "the body is not UTF-8 text (RFC 8259 requires it of JSON)"), undefined);
      return;
    }
    parse(request, bytes.toString("utf8"), done);
  });
}
