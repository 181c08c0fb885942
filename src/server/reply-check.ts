/**
 * How replies are written: JSON.stringify, never a schema-driven serializer, which would silently
 * drop a field its schema does not name. The response schemas (served in /openapi.json, read by
 * clients) are then held true by a check: with `check`, every reply is first compared with the
 * schema its route declares for its status, and one that does not match is not sent: the request
 * fails (500) with an error naming the route, the status and what did not match. Tests turn it
 * on; a node in production writes replies unchecked.
 */
import type { FastifySerializerCompiler } from "fastify";
import type { TSchema } from "typebox";
import { Compile } from "typebox/compile";

export class ReplySchemaError extends Error {
  override readonly name = "ReplySchemaError";
}

export function replySerializer(check: boolean): FastifySerializerCompiler<unknown> {
  return ({ schema, method, url, httpStatus }) => {
    if (!check) return (data: unknown) => JSON.stringify(data);
    const compiled = Compile(schema as TSchema);
    return (data: unknown) => {
      const text = JSON.stringify(data);
      // What a client reads: the reply as it is on the wire (no undefined, no Date objects).
      const wire: unknown = text === undefined ? undefined : JSON.parse(text);
      if (!compiled.Check(wire)) {
        const found = [...compiled.Errors(wire)].slice(0, 5).map((e) => `${e.instancePath || "/"}: ${e.message}`);
        throw new ReplySchemaError(`${method} ${url}: the ${httpStatus} reply does not match its declared schema (${found.join("; ")}): ${text?.slice(0, 500)}`);
      }
      return text;
    };
  };
}
