import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, api, forgetToken } from "./api.js";
import { TokenForm } from "./components/TokenForm.js";
import { type LiveStatus, followEvents } from "./live.js";
import { Job } from "./pages/Job.js";
import { Overview } from "./pages/Overview.js";
import { Queue } from "./pages/Queue.js";
import { Link, overviewHref, useLocation } from "./router.js";
import { Session } from "./session.js";
import type { WhoAmI } from "./types.js";

const LIVE_TEXT: Record<LiveStatus, string> = { connecting: "connecting", live: "live", reconnecting: "reconnecting", off: "not live" };

/** The shell: who the token is, the live stream, the header, and the page the URL names. */
export function App() {
  const { route, query, href } = useLocation();
  const [who, setWho] = useState<WhoAmI | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [needsToken, setNeedsToken] = useState(false);
  const [live, setLive] = useState<LiveStatus>("connecting");
  const [attempt, setAttempt] = useState(0);

  useEffect(() => {
    api<WhoAmI>("/whoami")
      .then((answer) => {
        setWho(answer);
        setNeedsToken(false);
        setProblem(null);
      })
      .catch((error: Error) => {
        setWho(null);
        // Unknown (401), or known but unable to read the queues (403): another token is needed.
        const refused = error instanceof ApiError && (error.status === 401 || error.status === 403);
        setNeedsToken(refused);
        // The first 401 is only the page finding out that tokens are configured.
        setProblem(refused && (error as ApiError).status === 401 && attempt === 0 ? null : error.message);
      });
  }, [attempt]);

  useEffect(() => {
    if (!who) return;
    const abort = new AbortController();
    followEvents(abort.signal, setLive);
    return () => abort.abort();
  }, [who]);

  // After a page change, focus goes to its heading, so a keyboard or screen-reader user starts there.
  const first = useRef(true);
  const pathname = href.split("?")[0];
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs when the page (the path, not the query) changes.
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    document.querySelector<HTMLElement>("main h1")?.focus();
  }, [pathname]);

  // biome-ignore lint/correctness/useExhaustiveDependencies: the route is read from the href it depends on.
  useEffect(() => {
    const parts = route.page === "job" ? [route.id, route.queue] : route.page === "queue" ? [route.queue] : [];
    document.title = [...parts, "Switchyard"].join(" · ");
  }, [href]);

  const signOut = () => {
    forgetToken();
    setWho(null);
    setAttempt((n) => n + 1);
  };

  let page = null;
  if (needsToken) page = <TokenForm problem={problem} onSaved={() => setAttempt((n) => n + 1)} />;
  else if (!who)
    page = (
      <p class={problem ? "notice notice-error" : "empty"} role={problem ? "alert" : "status"}>
        {problem ?? "Loading…"}
      </p>
    );
  else if (route.page === "overview") page = <Overview />;
  else if (route.page === "queue") page = <Queue key={route.queue} queue={route.queue} query={query} />;
  else if (route.page === "job") page = <Job key={`${route.queue}/${route.id}`} queue={route.queue} id={route.id} />;
  else
    page = (
      <>
        <h1 tabIndex={-1}>No such page</h1>
        <p>
          <Link href={overviewHref()}>Back to every queue</Link>
        </p>
      </>
    );

  return (
    <Session.Provider value={who}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <Link href={overviewHref()} class="brand">
          Switchyard
        </Link>
        <output class={`live live-${live}`} data-testid="live-status">
          {who ? LIVE_TEXT[live] : ""}
        </output>
        {who && (
          <span class="who" data-testid="who">
            {who.authEnabled ? `${who.name} · ${who.access}` : "no auth · admin"}
          </span>
        )}
        {who?.authEnabled && (
          <button type="button" class="button small" onClick={signOut}>
            Sign out
          </button>
        )}
      </header>
      <main id="main">{page}</main>
    </Session.Provider>
  );
}
