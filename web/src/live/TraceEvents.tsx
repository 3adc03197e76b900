// The recent trace events of the session, newest first, narrowed by kind; a selected step highlights its events.
import { useMemo, useState } from "react";
import { summarizeEvent, type TraceEvent } from "../trace";
import { stepOf } from "./trace";

/** The most rows drawn at once (the view keeps more events than that). */
const SHOWN = 300;

interface Props {
  events: TraceEvent[];
  /** The stream's number of `events[0]`: a row keeps its key while newer events push older ones out. */
  base: number;
  dropped: number;
  selected: number | null;
}

export function TraceEvents({ events, base, dropped, selected }: Props) {
  const [kind, setKind] = useState("");
  const kinds = useMemo(() => [...new Set(events.map((e) => e.event))].sort(), [events]);
  const rows = useMemo(() => {
    const picked: { key: number; event: TraceEvent }[] = [];
    for (let i = events.length - 1; i >= 0 && picked.length < SHOWN; i--) {
      if (!kind || events[i].event === kind) picked.push({ key: base + i, event: events[i] });
    }
    return picked;
  }, [events, base, kind]);
  return (
    <section className="live-card trace-card">
      <h3>
        Trace events{" "}
        <select data-testid="kind-filter" value={kind} onChange={(event) => setKind(event.target.value)}>
          <option value="">all kinds</option>
          {(kind && !kinds.includes(kind) ? [kind, ...kinds] : kinds).map((k) => (
            <option key={k} value={k}>
              {k}
            </option>
          ))}
        </select>{" "}
        <span className="muted" data-testid="trace-count">
          {rows.length} shown of {events.length} kept
        </span>
        {dropped > 0 && (
          <span className="dropped" data-testid="dropped" title="the server skipped events this page fell behind on">
            {dropped} dropped
          </span>
        )}
      </h3>
      <ol className="trace-events" data-testid="trace-events">
        {rows.map(({ key, event: e }) => {
          const step = stepOf(e);
          return (
            <li
              key={key}
              data-testid="trace-event"
              data-kind={e.event}
              className={selected !== null && step === selected ? "at-selected" : ""}
            >
              <span className="kind">{e.event}</span>
              {step !== null && <span className="muted step">#{step}</span>}
              <span className="fields">{summarizeEvent(e)}</span>
            </li>
          );
        })}
      </ol>
    </section>
  );
}
