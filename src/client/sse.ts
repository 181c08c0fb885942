/**
 * Reads a `text/event-stream` reply (WHATWG server-sent events) into events. Only what the node
 * sends is needed: `event`, `id`, `data` (multi-line joined with "\n"), comments ignored.
 */
import { WardenHttpError } from "./errors.js";

export interface RunEvent {
  /** the SSE `event` field; "message" when absent */
  readonly event: string;
  readonly id?: string;
  /** the raw data (for journal events, one journal line without its newline) */
  readonly data: string;
}

/** An event larger than this is not one the node sends (a journal entry is at most 1 MiB). */
const MAX_EVENT_CHARS = 2 * 1024 * 1024;

export async function* readEvents(response: Response, path: string): AsyncIterable<RunEvent> {
  if (response.body === null) return;
  const decoder = new TextDecoder("utf-8");
  let buffer = "";
  let data: string[] = [];
  let event = "";
  let id: string | undefined;
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          if (data.length > 0) yield { event: event === "" ? "message" : event, ...(id !== undefined ? { id } : {}), data: data.join("\n") };
          data = [];
          event = "";
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + (line[colon + 1] === " " ? 2 : 1));
        if (field === "data") data.push(value);
        else if (field === "event") event = value;
        else if (field === "id") id = value;
      }
      if (buffer.length + data.reduce((n, d) => n + d.length, 0) > MAX_EVENT_CHARS) {
        throw new WardenHttpError(502, { code: "event-too-large", detail: `an event of the stream is over ${MAX_EVENT_CHARS} characters` }, { method: "GET", path });
      }
      if (done) return;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
