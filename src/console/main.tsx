/** The operator console: session, layout and routes. */
import "./console.css";
import { render } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import type { SessionView } from "../client/wire.js";
import { currentSession, logIn, logOut } from "./api.js";
import { Bundles } from "./pages/bundles.js";
import { Invocations } from "./pages/invocations.js";
import { Keys } from "./pages/keys.js";
import { Overview } from "./pages/overview.js";
import { Queue } from "./pages/queue.js";
import { Reconcile } from "./pages/reconcile.js";
import { Run } from "./pages/run.js";
import { BASE, href, Link, navigate, useRoute, type Route } from "./router.js";
import { ErrorBox, Loading } from "./ui.js";

function Login(props: { onSession: (session: SessionView) => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (body: { login: string } | { token: string }): Promise<void> => {
    setBusy(true);
    setError(undefined);
    try {
      props.onSession(await logIn(body));
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => {
    // The one-time secret of `warden console`'s link: read from the fragment (never sent to any
    // server, so never logged), removed from the address bar and history at once, spent on the node.
    const secret = location.hash.slice(1);
    if (location.pathname === `${BASE}/login` && secret !== "") {
      history.replaceState(null, "", `${BASE}/`);
      void submit({ login: secret });
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);
  return (
    <main id="main" class="login">
      <h1>warden console</h1>
      <p>
        Run <code>warden console</code> on the node's machine and open the link it prints, or paste a token.
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (token !== "") void submit({ token });
        }}
      >
        <label for="token">Token</label>
        <input id="token" type="password" autocomplete="off" value={token} onInput={(e) => setToken((e.target as HTMLInputElement).value)} />
        <button type="submit" disabled={busy}>
          Log in
        </button>
      </form>
      {error !== undefined && <ErrorBox error={error} title="Login refused" />}
    </main>
  );
}

const NAV = [
  { label: "Overview", href: href.overview(), match: (p: string) => p === "/" },
  { label: "Invocations", href: href.invocations(), match: (p: string) => p.startsWith("/invocations") },
  { label: "Queue", href: href.queue(), match: (p: string) => p === "/queue" },
  { label: "Bundles", href: href.bundles(), match: (p: string) => p.startsWith("/bundles") },
  { label: "Keys", href: href.keys(), match: (p: string) => p.startsWith("/keys") },
];

function Page(props: { route: Route; session: SessionView }) {
  const { path } = props.route;
  const operator = props.session.role === "operator";
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (path === "/" || path === "/login") return <Overview />;
  if (parts[0] === "invocations" && parts.length === 1) return <Invocations route={props.route} scope={`api:${props.session.name}`} />;
  if (parts[0] === "invocations" && parts.length === 3) return <Run scope={parts[1]!} id={parts[2]!} operator={operator} />;
  if (parts[0] === "invocations" && parts.length === 4 && parts[3] === "reconcile") {
    if (props.session === PENDING) return <Loading what="the session" />;
    return operator ? <Reconcile scope={parts[1]!} id={parts[2]!} /> : <ErrorBox error={{ message: "only operators reconcile; this session is an observer's", code: "forbidden" }} />;
  }
  if (parts[0] === "bundles") return <Bundles operator={operator} {...(parts[1] === undefined ? {} : { selected: parts[1] })} />;
  if (parts[0] === "keys") return <Keys />;
  if (path === "/queue") return <Queue operator={operator} />;
  return <ErrorBox error={{ message: `the console has no page ${path}`, code: "page-not-found" }} />;
}

/** What a page knows before the session's answer: nothing it may change. */
const PENDING: SessionView = { name: "", role: "observer", csrf: "", expires_at: "" };

function App() {
  const route = useRoute();
  const [session, setSession] = useState<SessionView | undefined | null>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  useLayoutEffect(() => {
    if (location.pathname === `${BASE}/login` && location.hash.length > 1) return setSession(null);
    currentSession().then((s) => setSession(s ?? null), setError);
  }, []);
  useEffect(() => {
    const title = NAV.find((n) => n.match(route.path))?.label ?? "warden";
    document.title = `${title} · warden console`;
  }, [route.path]);
  // A link followed in place leaves focus on a link that is gone: focus the new page's main
  // region instead, so the next Tab enters its content (as after a full page load), and a screen
  // reader starts there. Not on a change of query alone (a filter, the next page): focus stays on
  // the control that made it.
  const shownPath = useRef(route.path);
  useEffect(() => {
    if (shownPath.current === route.path) return;
    shownPath.current = route.path;
    document.getElementById("main")?.focus({ preventScroll: true });
  }, [route.path]);
  if (error !== undefined) return <ErrorBox error={error} />;
  if (session === null) return <Login onSession={(s) => setSession(s)} />;
  // While the session is asked for, the page already loads its data (GET needs no CSRF token),
  // with no mutating control shown: one round trip less before the first row.
  const shown = session ?? PENDING;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">warden</span>
        <nav aria-label="Console">
          {NAV.map((item) => (
            <Link href={item.href} aria-current={item.match(route.path) ? "page" : undefined}>
              {item.label}
            </Link>
          ))}
        </nav>
        {session !== undefined && <span class="who">
          {session.name} <span class={`role role-${session.role}`}>{session.role}</span>{" "}
          <button
            type="button"
            class="link"
            onClick={() => {
              void logOut().finally(() => {
                setSession(null);
                navigate(`${BASE}/`, { replace: true });
              });
            }}
          >
            Log out
          </button>
        </span>}
      </header>
      <main id="main" tabIndex={-1}>
        <Page route={route} session={shown} />
      </main>
    </>
  );
}

render(<App />, document.getElementById("app")!);
