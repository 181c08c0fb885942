/** Client-side routing under /ui/: every page has its own URL (pasteable into a ticket), no full reloads. */
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";

export const BASE = "/ui";

export interface Route {
  /** path below /ui, e.g. "/invocations" */
  readonly path: string;
  readonly query: URLSearchParams;
}

function current(): Route {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) || "/" : "/";
  return { path, query: new URLSearchParams(location.search) };
}

const listeners = new Set<() => void>();

export function navigate(href: string, options: { replace?: boolean } = {}): void {
  if (options.replace === true) history.replaceState(null, "", href);
  else history.pushState(null, "", href);
  for (const listener of listeners) listener();
  if (options.replace !== true) window.scrollTo(0, 0);
}

addEventListener("popstate", () => {
  for (const listener of listeners) listener();
});

export function useRoute(): Route {
  const [route, setRoute] = useState(current);
  useEffect(() => {
    const update = (): void => setRoute(current());
    listeners.add(update);
    return () => void listeners.delete(update);
  }, []);
  return route;
}

/** A console link: a real <a href> (opens in a new tab, copies), routed in place on a plain click. */
export function Link(props: { href: string; children: ComponentChildren; class?: string; "aria-current"?: "page" | undefined }) {
  return (
    <a
      href={props.href}
      class={props.class}
      aria-current={props["aria-current"]}
      onClick={(event) => {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        navigate(props.href);
      }}
    >
      {props.children}
    </a>
  );
}

export const href = {
  overview: () => `${BASE}/`,
  invocations: (query: Record<string, string | undefined> = {}) => {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== "") params.set(k, v);
    const text = params.toString();
    return `${BASE}/invocations${text === "" ? "" : `?${text}`}`;
  },
  invocation: (scope: string, id: string) => `${BASE}/invocations/${encodeURIComponent(scope)}/${encodeURIComponent(id)}`,
  reconcile: (scope: string, id: string) => `${BASE}/invocations/${encodeURIComponent(scope)}/${encodeURIComponent(id)}/reconcile`,
  queue: () => `${BASE}/queue`,
  bundles: () => `${BASE}/bundles`,
  bundle: (id: string) => `${BASE}/bundles/${encodeURIComponent(id)}`,
  keys: () => `${BASE}/keys`,
};
