/**
 * A loopback OTLP/HTTP traces endpoint for tests: it keeps every POST to `/v1/traces` and answers
 * 200, and decodes what it got with the official OTLP .proto files (test/fixtures/otlp-proto),
 * compiled by Debian's protoc and parsed by Google's protobuf (otlp_decode.py), not by warden's code
 * nor the SDK that sent it.
 */
import { spawn } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { repo } from "./node.js";

export const PROTOC = "/usr/bin/protoc";
const PYTHON = "/usr/bin/python3";
const PROTO_ROOT = join(repo, "test", "fixtures", "otlp-proto");
const DECODER = join(repo, "test", "support", "otlp_decode.py");

/** An OTLP attribute value as the proto3 JSON mapping prints it (int64 as a string). */
export interface AnyValue {
  readonly string_value?: string;
  readonly int_value?: string;
  readonly bool_value?: boolean;
}

export interface DecodedSpan {
  readonly trace_id: string;
  readonly span_id: string;
  readonly parent_span_id?: string;
  readonly name: string;
  readonly kind: string;
  readonly start_time_unix_nano: string;
  readonly end_time_unix_nano: string;
  readonly attributes?: readonly { readonly key: string; readonly value: AnyValue }[];
  readonly status?: { readonly code?: string; readonly message?: string };
  /** the resource's `service.name` of the export it came in */
  readonly service: string;
}

interface Decoded {
  resource_spans?: {
    resource?: { attributes?: { key: string; value: AnyValue }[] };
    scope_spans?: { spans?: Omit<DecodedSpan, "service">[] }[];
  }[];
}

export class OtlpReceiver {
  readonly #server: Server;
  readonly #bodies: { readonly contentType: string; readonly body: Buffer }[] = [];
  readonly #decoded = new Map<number, DecodedSpan[]>();
  readonly url: string;

  private constructor(server: Server, url: string) {
    this.#server = server;
    this.url = url;
    server.on("request", (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        if (req.method === "POST" && req.url === "/v1/traces") this.#bodies.push({ contentType: String(req.headers["content-type"]), body: Buffer.concat(chunks) });
        res.writeHead(req.url === "/v1/traces" ? 200 : 404, { "content-type": "application/json" }).end("{}");
      });
    });
  }

  static async start(): Promise<OtlpReceiver> {
    const server = createServer();
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    return new OtlpReceiver(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`);
  }

  /** How many exports arrived. */
  get exports(): number {
    return this.#bodies.length;
  }

  /** Every span received so far, each export decoded once. */
  async spans(): Promise<DecodedSpan[]> {
    const out: DecodedSpan[] = [];
    for (let i = 0; i < this.#bodies.length; i++) {
      let spans = this.#decoded.get(i);
      if (spans === undefined) {
        const { contentType, body } = this.#bodies[i]!;
        if (!contentType.startsWith("application/json")) throw new Error(`export ${i} came as ${contentType}, not OTLP/HTTP JSON`);
        spans = spansOf(JSON.parse(await decode(body)) as Decoded);
        this.#decoded.set(i, spans);
      }
      out.push(...spans);
    }
    return out;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((done) => this.#server.close(() => done()));
  }
}

function spansOf(decoded: Decoded): DecodedSpan[] {
  return (decoded.resource_spans ?? []).flatMap((rs) => {
    const service = rs.resource?.attributes?.find((a) => a.key === "service.name")?.value.string_value ?? "";
    return (rs.scope_spans ?? []).flatMap((ss) => (ss.spans ?? []).map((s) => ({ ...s, service })));
  });
}

function decode(body: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [DECODER, PROTOC, PROTO_ROOT], { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (s: string) => (out += s));
    child.stderr.setEncoding("utf8").on("data", (s: string) => (err += s));
    child.once("error", reject);
    child.once("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`the OTLP decoder refused an export (exit ${code}): ${err.trim().split("\n").at(-1) ?? ""}`))));
    child.stdin.end(body);
  });
}

/** A span attribute's value: a string, or an int64 as a number. */
export function attr(span: DecodedSpan, key: string): string | number | boolean | undefined {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  if (value === undefined) return undefined;
  if (value.string_value !== undefined) return value.string_value;
  if (value.int_value !== undefined) return Number(value.int_value);
  return value.bool_value;
}
