/**
 * The console's document for one page, naming the API request the page makes first: the browser
 * fetches it beside the script (`<link rel="preload" as="fetch">`) and the page's own fetch takes
 * the answer, instead of asking only once the script has been parsed and run — on a busy machine,
 * most of the time to the first row. Only the Invocations page is named (its rows are what the
 * operator waits for); the request is rebuilt from the parts the page reads (a known status, a
 * cursor of base64url characters), never copied from the address.
 */
import { gzipSync } from "node:zlib";
import { invocationListStatus, invocationsPageQuery } from "../../api/console-pages.js";
import type { ConsoleAsset } from "./assets.js";

const CURSOR = /^[A-Za-z0-9_-]{1,2048}$/;

/** The API path the page at `url` (path and query, as requested) fetches first; undefined for other pages. */
export function firstRequestOf(url: string): string | undefined {
  const parsed = new URL(url, "http://console.invalid");
  if (parsed.pathname !== "/ui/invocations") return undefined;
  const raw = parsed.searchParams.get("cursor");
  const cursor = raw !== null && CURSOR.test(raw) ? raw : undefined;
  if (raw !== null && cursor === undefined) return undefined;
  const query = invocationsPageQuery(invocationListStatus(parsed.searchParams.get("status")), cursor);
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) params.set(key, String(value));
  return `/v1/invocations?${params.toString()}`;
}

/** `index` with a preload of `path` before `</head>` (the path holds no character HTML would need escaped but `&`). */
export function withPreload(index: ConsoleAsset, path: string): ConsoleAsset {
  const link = `<link rel="preload" as="fetch" crossorigin="anonymous" href="${path.replaceAll("&", "&amp;")}">\n`;
  const body = Buffer.from(index.body.toString("utf8").replace("</head>", `${link}</head>`), "utf8");
  return { type: index.type, body, gzip: gzipSync(body) };
}
