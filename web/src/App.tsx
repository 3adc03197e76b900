// The shell: a bar with the three places (Canvas, Live, Runs), the token prompt when the server wants one, and the
// page of the current hash route (an episode's viewer, `#/runs/<run>/episode/<id>`, is a page of its own). One bundle
// for the three places: loading each place's code on first visit made every page slower to become interactive
// (benchmarks/web_tti.py: about 250 ms more on loopback).
import { useEffect, useState } from "react";
import { onUnauthorized, setToken } from "./api";
import { CanvasPage } from "./canvas/CanvasPage";
import { LivePage } from "./live/LivePage";
import { EpisodeViewerPage } from "./runs/EpisodeViewer";
import { RunsPage } from "./runs/RunsPage";
import { href, useRoute, type Route } from "./router";

const PLACES = [
  { key: "canvas", label: "Canvas" },
  { key: "live", label: "Live" },
  { key: "runs", label: "Runs" },
] as const;

export function App() {
  const route = useRoute();
  const place = route.parts[0] ?? "canvas";
  const viewer = episodeRoute(route);
  const [needsToken, setNeedsToken] = useState(false);
  useEffect(() => onUnauthorized(() => setNeedsToken(true)), []);

  return (
    <div className="app">
      <header className="topbar">
        <span className="brand">hylo</span>
        <nav>
          {PLACES.map(({ key, label }) => (
            <a key={key} href={href([key])} className={place === key ? "active" : ""} data-testid={`nav-${key}`}>
              {label}
            </a>
          ))}
        </nav>
      </header>
      {needsToken && <TokenPrompt onDone={() => setNeedsToken(false)} />}
      <main className="page">
        {place === "canvas" && <CanvasPage route={route} />}
        {place === "live" && <LivePage route={route} />}
        {viewer ? (
          <EpisodeViewerPage key={`${viewer.runId}/${viewer.episodeId}`} {...viewer} />
        ) : (
          (place === "runs" || place === "compare" || place === "ab" || place === "sweeps") && <RunsPage route={route} />
        )}
      </main>
    </div>
  );
}

/** `#/runs/<run>/episode/<episode id>?attempt=<n>`: the episode viewer's page; null for any other route. */
function episodeRoute(route: Route): { runId: string; episodeId: string; attempt: number | null } | null {
  const [place, runId, what, episodeId] = route.parts;
  if (place !== "runs" || what !== "episode" || !runId || !episodeId) return null;
  const attempt = Number(route.query.get("attempt"));
  return { runId, episodeId, attempt: Number.isInteger(attempt) && attempt >= 1 ? attempt : null };
}

function TokenPrompt({ onDone }: { onDone: () => void }) {
  const [value, setValue] = useState("");
  return (
    <form
      className="token-prompt"
      onSubmit={(event) => {
        event.preventDefault();
        setToken(value.trim() || null);
        onDone();
        location.reload();
      }}
    >
      <span>This server needs its token: open the URL hylo serve printed (…/#token=…), or paste the token here.</span>
      <input type="password" value={value} onChange={(e) => setValue(e.target.value)} placeholder="token" />
      <button type="submit">Use token</button>
    </form>
  );
}
