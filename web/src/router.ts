// Hash routes (`#/runs/<id>`), so that `hylo serve` only has to serve one page and a link survives a reload.
import { useEffect, useState } from "react";

export interface Route {
  /** Path segments after `#/`, e.g. ["runs", "abc123"]. */
  parts: string[];
  /** The query after `?` in the hash. */
  query: URLSearchParams;
}

export function parseHash(hash: string): Route {
  const raw = hash.replace(/^#\/?/, "");
  const [path, search = ""] = raw.split("?", 2);
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(search) };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const update = () => setRoute(parseHash(location.hash));
    window.addEventListener("hashchange", update);
    return () => window.removeEventListener("hashchange", update);
  }, []);
  return route;
}

export function href(parts: string[], query?: Record<string, string>): string {
  const path = parts.map(encodeURIComponent).join("/");
  const search = query ? `?${new URLSearchParams(query).toString()}` : "";
  return `#/${path}${search}`;
}

export function navigate(parts: string[], query?: Record<string, string>): void {
  location.hash = href(parts, query);
}

/** The episode viewer's address: `#/runs/<run>/episode/<episode id>` (`?attempt=<n>` for an earlier attempt). */
export function episodeHref(runId: string, episodeId: string, attempt?: number): string {
  return href(["runs", runId, "episode", episodeId], attempt === undefined ? undefined : { attempt: String(attempt) });
}
