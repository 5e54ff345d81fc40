import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";

/*
 * Path routing under /dashboard, so every page has a URL the server answers with the same shell:
 * /dashboard, /dashboard/queues/:queue (?state, ?cursor), /dashboard/queues/:queue/jobs/:id.
 */

export const BASE = "/dashboard";

export type Route =
  | { page: "overview" }
  | { page: "queue"; queue: string }
  | { page: "job"; queue: string; id: string }
  | { page: "missing" };

export const overviewHref = () => BASE;
export const queueHref = (queue: string, query: Record<string, string | undefined> = {}) => {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value) params.set(key, value);
  const search = params.toString();
  return `${BASE}/queues/${encodeURIComponent(queue)}${search ? `?${search}` : ""}`;
};
export const jobHref = (queue: string, id: string) => `${BASE}/queues/${encodeURIComponent(queue)}/jobs/${encodeURIComponent(id)}`;

export function parseRoute(pathname: string): Route {
  const rest = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : null;
  if (rest === null) return { page: "missing" };
  const parts = rest.split("/").filter(Boolean);
  try {
    const decoded = parts.map((part) => decodeURIComponent(part));
    if (decoded.length === 0) return { page: "overview" };
    if (decoded[0] === "queues" && decoded.length === 2) return { page: "queue", queue: decoded[1]! };
    if (decoded[0] === "queues" && decoded[2] === "jobs" && decoded.length === 4)
      return { page: "job", queue: decoded[1]!, id: decoded[3]! };
  } catch {
    // A malformed %-escape: no such page.
  }
  return { page: "missing" };
}

const listeners = new Set<() => void>();
const notify = () => {
  for (const listener of listeners) listener();
};
window.addEventListener("popstate", notify);

export function navigate(href: string, { replace = false } = {}): void {
  if (replace) history.replaceState(null, "", href);
  else history.pushState(null, "", href);
  notify();
}

export function useLocation(): { route: Route; query: URLSearchParams; href: string } {
  const [href, setHref] = useState(location.pathname + location.search);
  useEffect(() => {
    const update = () => setHref(location.pathname + location.search);
    listeners.add(update);
    return () => listeners.delete(update);
  }, []);
  return { route: parseRoute(location.pathname), query: new URLSearchParams(location.search), href };
}

/** A real link (it opens in a new tab, and is focusable), followed in the page when clicked plainly. */
export function Link({
  href,
  children,
  ...rest
}: { href: string; children: ComponentChildren; class?: string; "aria-current"?: "page" | undefined }) {
  const onClick = (event: MouseEvent) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(href);
  };
  return (
    <a href={href} onClick={onClick} {...rest}>
      {children}
    </a>
  );
}
