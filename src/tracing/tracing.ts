/**
 * OpenTelemetry traces of runs (DESIGN.md "Traces"): one `invoke_agent` span per run and one
 * `execute_tool` child span per tool effect, exported over OTLP/HTTP by the OpenTelemetry JS SDK.
 *
 * Off unless the standard environment asks for it; the SDK's own exporter reads the endpoint,
 * headers, timeout and compression from that environment, so nothing here parses them again. The spans are made from the journal's
 * entries as they become durable: a tool span starts and ends at its effect entries' `ts`.
 *
 * Exporting never fails or slows a run: spans are handed to the SDK's batch processor (its
 * bounded queue, 2048 spans, drops when full; batches every 5 s) and sent from there; a failed export is logged once, by its message only
 * (the exporter's headers, which may hold a collector's token, are never printed).
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, defaultTextMapGetter, defaultTextMapSetter, trace, type Context, type Span, type Tracer } from "@opentelemetry/api";
import { ExportResultCode, W3CTraceContextPropagator, getBooleanFromEnv, getStringFromEnv, getStringListFromEnv, type ExportResult } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, TracerProvider, type ReadableSpan, type SpanExporter } from "@opentelemetry/sdk-trace";
import { ATTR_ERROR_TYPE, ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";
import {
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_CONVERSATION_ID,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_TOOL_CALL_ID,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL,
  GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT,
  GEN_AI_PROVIDER_NAME_VALUE_ANTHROPIC,
  GEN_AI_PROVIDER_NAME_VALUE_OPENAI,
} from "@opentelemetry/semantic-conventions/incubating";
import { ValidationError } from "../core/errors.js";
import type { JournalEntry } from "../journal/types.js";

/** The W3C trace context a caller hands over (`traceparent` / `tracestate` headers or variables). */
export interface TraceCarrier {
  readonly traceparent?: string;
  readonly tracestate?: string;
}

/** The variables a traced run's agent gets its context in (Claude Code and Codex read both). */
export const TRACE_ENV_NAMES = ["TRACEPARENT", "TRACESTATE"] as const;

/** Where the agent's own OTLP exporter may send its spans (Codex's `[otel]` table). */
export interface AgentTraceExport {
  /** the node's OTLP/HTTP traces endpoint */
  readonly endpoint: string;
}

export interface RunTraceStart {
  readonly runId: string;
  readonly scope: string;
  readonly idempotencyId: string;
  /** warden's provider name (claude, codex, kimi): the span's `gen_ai.agent.name` */
  readonly provider: string;
  readonly model?: string;
  /** the caller's context: the run span becomes its child */
  readonly parent?: TraceCarrier;
}

export interface RunTraceEnd {
  /** the invocation's state once the run ended (`recorded`, `unresolved`, ...) or `crashed` */
  readonly status: string;
  /** a recorded run that is a failure (its result says so) */
  readonly failed?: boolean;
  readonly stopped?: string;
  /** the journal's tail hash (its head) */
  readonly journalHead?: string;
  /** the index of the run's seal in the transparency log, when it was logged */
  readonly logLeaf?: number;
  /** when the run ended (ms since the epoch); default: now */
  readonly at?: number;
}

/** GenAI provider names (the semantic conventions' well-known values) of warden's providers. */
const GEN_AI_PROVIDERS: Readonly<Record<string, string>> = {
  claude: GEN_AI_PROVIDER_NAME_VALUE_ANTHROPIC,
  codex: GEN_AI_PROVIDER_NAME_VALUE_OPENAI,
  kimi: "moonshot",
};

const propagator = new W3CTraceContextPropagator();

/**
 * Reads the switch from the standard environment: on with `OTEL_TRACES_EXPORTER=otlp`, or with an
 * OTLP endpoint set (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`) and no
 * exporter named; off with `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`, and by default.
 * An exporter or protocol warden cannot honour is refused rather than silently ignored.
 */
export function tracingWanted(): boolean {
  if (getBooleanFromEnv("OTEL_SDK_DISABLED")) return false;
  const exporters = getStringListFromEnv("OTEL_TRACES_EXPORTER") ?? [];
  if (exporters.includes("none")) return false;
  const unsupported = exporters.filter((e) => e !== "otlp");
  if (unsupported.length > 0) {
    throw new ValidationError("traces-exporter-unsupported", `OTEL_TRACES_EXPORTER=${exporters.join(",")}: warden exports traces with otlp only (or none)`, {
      details: { exporters: unsupported },
    });
  }
  const on = exporters.includes("otlp") || getStringFromEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") !== undefined || getStringFromEnv("OTEL_EXPORTER_OTLP_ENDPOINT") !== undefined;
  if (!on) return false;
  const protocol = getStringFromEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") ?? getStringFromEnv("OTEL_EXPORTER_OTLP_PROTOCOL");
  if (protocol !== undefined && protocol !== "http/json") {
    throw new ValidationError("traces-protocol-unsupported", `OTLP protocol ${JSON.stringify(protocol)}: warden sends traces as OTLP/HTTP JSON (http/json)`, { details: { protocol } });
  }
  return true;
}

/** The traces endpoint the SDK's exporter sends to, as the OTLP exporter specification derives it. */
function tracesEndpoint(): string {
  const own = getStringFromEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  if (own !== undefined) return own;
  const base = getStringFromEnv("OTEL_EXPORTER_OTLP_ENDPOINT") ?? "http://localhost:4318";
  return `${base.replace(/\/+$/, "")}/v1/traces`;
}

/** Delegates to the SDK's exporter and says once that exporting fails (by message: no headers). */
class LoggedExporter implements SpanExporter {
  readonly #inner: SpanExporter;
  readonly #warn: (message: string) => void;
  #warned = false;

  constructor(inner: SpanExporter, warn: (message: string) => void) {
    this.#inner = inner;
    this.#warn = warn;
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.#inner.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS && !this.#warned) {
        this.#warned = true;
        this.#warn(`traces: exporting spans failed (${result.error?.message ?? "unknown error"}); runs go on, further failures are not logged`);
      }
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }
}

export interface TracingOptions {
  /** the node's version (`service.version`) */
  readonly version?: string;
  /** told once that exporting failed */
  readonly warn?: (message: string) => void;
}

/** The node's tracer: its own provider (never the process's global one, which is the embedder's). */
export class Tracing {
  readonly #provider: TracerProvider;
  readonly #tracer: Tracer;
  /** what Codex's `[otel]` table points its own exporter at */
  readonly agentExport: AgentTraceExport;

  private constructor(provider: TracerProvider, version: string | undefined) {
    this.#provider = provider;
    this.#tracer = provider.getTracer("warden", version);
    this.agentExport = { endpoint: tracesEndpoint() };
  }

  /** The node's tracing as the environment configures it, or undefined when it is off. */
  static fromEnvironment(options: TracingOptions): Tracing | undefined {
    if (!tracingWanted()) return undefined;
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the env detector) win over warden's defaults.
    const resource = defaultResource()
      .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: "warden", ...(options.version === undefined ? {} : { "service.version": options.version }) }))
      .merge(detectResources({ detectors: [envDetector] }));
    const exporter = new LoggedExporter(new OTLPTraceExporter(), options.warn ?? (() => undefined));
    const provider = new TracerProvider({ resource, spanProcessors: [new BatchSpanProcessor({ exporter })] });
    return new Tracing(provider, options.version);
  }

  /** Starts a run's span, the child of the caller's context when it carries a valid one. */
  startRun(start: RunTraceStart): RunTrace {
    const parent = start.parent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, { ...start.parent }, defaultTextMapGetter);
    const span = this.#tracer.startSpan(
      `${GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT} ${start.provider}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT,
          [ATTR_GEN_AI_PROVIDER_NAME]: GEN_AI_PROVIDERS[start.provider] ?? start.provider,
          [ATTR_GEN_AI_AGENT_NAME]: start.provider,
          ...(start.model === undefined ? {} : { [ATTR_GEN_AI_REQUEST_MODEL]: start.model }),
          "warden.run_id": start.runId,
          "warden.scope": start.scope,
          "warden.idempotency_id": start.idempotencyId,
        },
      },
      parent,
    );
    return new RunTrace(this.#tracer, span, trace.setSpan(parent, span), this.agentExport);
  }

  /** Sends what is queued and stops: spans of runs still open are not sent. */
  async shutdown(): Promise<void> {
    await this.#provider.shutdown().catch(() => undefined);
  }
}

/** One run's span and its tool spans, fed the run's journal entries as they become durable. */
export class RunTrace {
  readonly #tracer: Tracer;
  readonly #span: Span;
  readonly #context: Context;
  readonly #tools = new Map<string, Span>();
  readonly agentExport: AgentTraceExport;
  #ended = false;

  constructor(tracer: Tracer, span: Span, context: Context, agentExport: AgentTraceExport) {
    this.#tracer = tracer;
    this.#span = span;
    this.#context = context;
    this.agentExport = agentExport;
  }

  /** The run span's context for the agent: `TRACEPARENT` (and `TRACESTATE` when the caller sent one). */
  carrier(): TraceCarrier {
    const out: Record<string, string> = {};
    propagator.inject(this.#context, out, defaultTextMapSetter);
    return out;
  }

  /** The agent's CLI session (`gen_ai.conversation.id`). */
  conversation(id: string): void {
    this.#span.setAttribute(ATTR_GEN_AI_CONVERSATION_ID, id);
  }

  /** What the run spent, as its `run.spend` entry says (the meter's totals). */
  spent(input: number, output: number): void {
    this.#span.setAttribute(ATTR_GEN_AI_USAGE_INPUT_TOKENS, input);
    this.#span.setAttribute(ATTR_GEN_AI_USAGE_OUTPUT_TOKENS, output);
  }

  /** A durable journal entry of the run: a tool effect's start or finish becomes its span's. */
  take(entry: JournalEntry): void {
    if (this.#ended) return;
    const event = entry.event;
    const at = Date.parse(entry.ts);
    if (event.type === "effect.started" && event.kind === "tool") {
      const span = this.#tracer.startSpan(
        `${GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL} ${event.name}`,
        {
          kind: SpanKind.INTERNAL,
          startTime: at,
          attributes: {
            [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL,
            [ATTR_GEN_AI_TOOL_NAME]: event.name,
            [ATTR_GEN_AI_TOOL_CALL_ID]: event.effect_id,
            "warden.effect.fingerprint": event.fingerprint,
          },
        },
        this.#context,
      );
      this.#tools.set(event.effect_id, span);
    } else if (event.type === "effect.finished") {
      const span = this.#tools.get(event.effect_id);
      if (span === undefined) return;
      this.#tools.delete(event.effect_id);
      span.setAttribute("warden.effect.outcome", event.outcome);
      if (event.outcome === "failed") {
        span.setAttribute(ATTR_ERROR_TYPE, "tool_failed");
        span.setStatus({ code: SpanStatusCode.ERROR, message: "the tool call failed" });
      } else if (event.outcome === "unknown") {
        span.setAttribute(ATTR_ERROR_TYPE, "outcome_unknown");
        span.setStatus({ code: SpanStatusCode.ERROR, message: "the tool call's outcome is unknown" });
      }
      span.end(at);
    }
  }

  /** Ends the run's span with what is known of its end; any tool span left open ends unknown. */
  end(result: RunTraceEnd): void {
    if (this.#ended) return;
    this.#ended = true;
    const now = result.at ?? Date.now();
    for (const span of this.#tools.values()) {
      span.setAttribute("warden.effect.outcome", "unknown");
      span.setStatus({ code: SpanStatusCode.ERROR, message: "the tool call's outcome is unknown" });
      span.end(now);
    }
    this.#tools.clear();
    const span = this.#span;
    span.setAttribute("warden.outcome", result.status);
    if (result.stopped !== undefined) span.setAttribute("warden.stopped", result.stopped);
    if (result.journalHead !== undefined) span.setAttribute("warden.journal.head", result.journalHead);
    if (result.logLeaf !== undefined) span.setAttribute("warden.log.leaf", result.logLeaf);
    if (result.status !== "recorded") {
      span.setAttribute(ATTR_ERROR_TYPE, result.status);
      span.setStatus({ code: SpanStatusCode.ERROR, message: `the run ended ${result.status}` });
    } else if (result.failed === true) {
      span.setAttribute(ATTR_ERROR_TYPE, "run_failed");
      span.setStatus({ code: SpanStatusCode.ERROR, message: "the run's result is a failure" });
    }
    span.end(now);
  }
}
