/** Small pieces every page uses: loading and error states, times, statuses, a data hook. */
import type { ComponentChildren } from "preact";
import { useCallback, useLayoutEffect, useRef, useState } from "preact/hooks";
import { describeError } from "./api.js";

/** A local time; UTC on hover. */
export function Time(props: { iso: string | undefined }) {
  if (props.iso === undefined) return <span>—</span>;
  const date = new Date(props.iso);
  if (Number.isNaN(date.getTime())) return <span>{props.iso}</span>;
  return (
    <time dateTime={props.iso} title={`${date.toISOString().replace("T", " ").replace("Z", " UTC")}`}>
      {date.toLocaleString()}
    </time>
  );
}

/** Every API error as the node said it: message and stable code. */
export function ErrorBox(props: { error: unknown; title?: string }) {
  const { message, code } = describeError(props.error);
  return (
    <div class="error" role="alert">
      <strong>{props.title ?? "Error"}:</strong> {message} <code class="code">{code}</code>
    </div>
  );
}

export function Status(props: { status: string }) {
  return <span class={`status status-${props.status}`}>{props.status.replace("_", " ")}</span>;
}

export function Empty(props: { children: ComponentChildren }) {
  return <div class="empty">{props.children}</div>;
}

export function Loading(props: { what: string }) {
  return (
    <p class="loading" role="status">
      Loading {props.what}…
    </p>
  );
}

export interface Async<T> {
  readonly data: T | undefined;
  readonly error: unknown;
  readonly loading: boolean;
  reload(): void;
}

/**
 * Runs `load` when `deps` change (and every `pollMs`, when set), keeping the last good data while
 * it reloads. `load` may ask `current()` whether its answer is still wanted (a long scan stops).
 */
export function useAsync<T>(load: (current: () => boolean) => Promise<T>, deps: readonly unknown[], pollMs?: number): Async<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: undefined, loading: true });
  const generation = useRef(0);
  const run = useCallback(() => {
    const mine = ++generation.current;
    setState((s) => ({ ...s, loading: true }));
    // (a generation superseded by the next load, or by unmounting, is not current)
    load(() => mine === generation.current).then(
      (data) => mine === generation.current && setState({ data, error: undefined, loading: false }),
      (error: unknown) => mine === generation.current && setState((s) => ({ data: s.data, error, loading: false })),
    );
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
  // A layout effect starts the request right after render, not after the next frame (which a background tab or a busy machine delays).
  useLayoutEffect(() => {
    run();
    const timer = pollMs === undefined ? undefined : setInterval(run, pollMs);
    return () => {
      clearInterval(timer);
      generation.current++;
    };
  }, [run, pollMs]);
  return { ...state, reload: run };
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function shortDigest(digest: string): string {
  return digest.replace(/^sha256:/, "").slice(0, 12);
}
