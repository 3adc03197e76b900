// A run's episodes, one server-side page at a time (100 rows), filtered by status and task; a row selects its
// episode (trace and video in the panel beside).
import { useEffect, useState } from "react";
import { api, errorMessage } from "../api";
import { StatusBadge } from "./Progress";
import { STATUSES, runPath, type EpisodePage, type EpisodeRow } from "./types";

export const PAGE_SIZE = 100;

interface Query {
  offset: number;
  status: string;
  task: string;
}

function pagePath(runId: string, query: Query): string {
  const params = new URLSearchParams({ offset: String(query.offset), limit: String(PAGE_SIZE) });
  if (query.status) params.set("status", query.status);
  if (query.task) params.set("task", query.task);
  return runPath(runId, `/episodes?${params.toString()}`);
}

export function EpisodeList(props: {
  runId: string;
  tasks: string[];
  version: number;
  selected: string | null;
  onSelect: (episode: EpisodeRow) => void;
}) {
  const { runId, version } = props;
  const [query, setQuery] = useState<Query>({ offset: 0, status: "", task: "" });
  /** The page shown and the query it answers (an older answer never replaces a newer one: see `cancelled`). */
  const [shown, setShown] = useState<{ query: Query; page: EpisodePage } | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let cancelled = false;
    api<EpisodePage>(pagePath(runId, query))
      .then((answer) => {
        if (cancelled) return;
        setShown({ query, page: answer });
        setError(null);
      })
      .catch((e: unknown) => !cancelled && setError(errorMessage(e)));
    return () => {
      cancelled = true;
    };
  }, [runId, query, version]);

  const page = shown?.page ?? null;
  /** Another page or filter was asked for and its answer has not come yet (a refresh of the same one does not
   * count: the pager stays usable while a running run grows). */
  const loading = shown?.query !== query && error === null;

  const ask = (update: (q: Query) => Query) => {
    setError(null);
    setQuery(update);
  };
  const filter = (patch: Partial<Query>) => ask((q) => ({ ...q, ...patch, offset: 0 }));
  // The pager speaks of the page shown (the server's answer), not of the one asked for and still on its way, and
  // waits for that answer before moving again: a total from another filter never decides what Next may do.
  const total = page?.total ?? 0;
  const shownOffset = page?.offset ?? 0;
  const first = total ? shownOffset + 1 : 0;
  const last = Math.min(shownOffset + (page?.episodes.length ?? 0), total);

  return (
    <section className="panel episode-section">
      <div className="section-head">
        <h3>Episodes</h3>
        <label>
          Status{" "}
          <select data-testid="status-filter" value={query.status} onChange={(e) => filter({ status: e.target.value })}>
            <option value="">all</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Task{" "}
          <select data-testid="task-filter" value={query.task} onChange={(e) => filter({ task: e.target.value })}>
            <option value="">all</option>
            {props.tasks.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
        <span className="pager">
          <button
            type="button"
            data-testid="page-prev"
            disabled={loading || query.offset === 0}
            onClick={() => ask((q) => ({ ...q, offset: Math.max(0, q.offset - PAGE_SIZE) }))}
          >
            ‹ Prev
          </button>
          <span
            data-testid="page-info"
            data-total={total}
            data-offset={shownOffset}
            aria-busy={loading}
            className={loading ? "muted" : ""}
          >
            {first}–{last} of {total}
          </span>
          <button
            type="button"
            data-testid="page-next"
            disabled={loading || query.offset + PAGE_SIZE >= total}
            onClick={() => ask((q) => ({ ...q, offset: q.offset + PAGE_SIZE }))}
          >
            Next ›
          </button>
        </span>
      </div>
      {error && (
        <div className="error-message" data-testid="episodes-error">
          {error}
        </div>
      )}
      <div className="episode-scroll">
        <table className={loading ? "episode-list stale" : "episode-list"} data-testid="episode-list" aria-busy={loading}>
          <thead>
            <tr>
              <th>Task</th>
              <th className="num">#</th>
              <th className="num">Seed</th>
              <th>Status</th>
              <th>Reason</th>
              <th className="num">Steps</th>
              <th className="num">Attempt</th>
              <th>Video</th>
            </tr>
          </thead>
          <tbody>
            {page?.episodes.map((episode) => (
              <EpisodeLine
                key={episode.episode_id}
                episode={episode}
                selected={episode.episode_id === props.selected}
                onSelect={props.onSelect}
              />
            ))}
          </tbody>
        </table>
        {page && page.episodes.length === 0 && <p className="muted">No episode matches.</p>}
      </div>
    </section>
  );
}

function EpisodeLine(props: { episode: EpisodeRow; selected: boolean; onSelect: (episode: EpisodeRow) => void }) {
  const { episode } = props;
  return (
    <tr
      data-testid="episode-row"
      data-episode-id={episode.episode_id}
      data-status={episode.status}
      className={props.selected ? "selected" : ""}
      onClick={() => props.onSelect(episode)}
      title={episode.episode_id}
    >
      <td>{episode.task}</td>
      <td className="num">{episode.index}</td>
      <td className="num mono">{episode.seed}</td>
      <td>
        <StatusBadge status={episode.status} />
      </td>
      <td className="reason" title={episode.detail ?? episode.reason}>
        {episode.reason}
      </td>
      <td className="num">{episode.steps}</td>
      <td className="num">{episode.attempt}</td>
      <td>{episode.video ? <span data-testid="episode-has-video" className="video-mark">▶ video</span> : null}</td>
    </tr>
  );
}
