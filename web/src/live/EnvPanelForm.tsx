// The one renderer of every env panel: its fields (select, number, text, slider; a dynamic select's choices come
// from `on_options`) and its actions, each enabled per its `enabled_when` in the session's state.
import { useEffect, useRef, useState } from "react";
import { api, errorMessage } from "../api";
import type { EnabledWhen, PanelAction, PanelField, PanelInfo, SessionState } from "./types";

/** Whether an action declared `enabled_when` may be pressed in `state` (no session counts as idle). */
export function enabledIn(when: EnabledWhen, state: SessionState): boolean {
  switch (when) {
    case "always":
      return true;
    case "idle":
      return state === "idle";
    case "running":
      return state === "running";
    case "paused":
      return state === "paused";
    case "not_running":
      return state === "idle" || state === "paused";
    case "active":
      return state === "running" || state === "paused";
  }
}

interface Choice {
  value: unknown;
  label: string;
}

function choice(option: unknown): Choice {
  if (option && typeof option === "object" && "value" in option) {
    const entry = option as { value: unknown; label?: unknown };
    return { value: entry.value, label: String(entry.label ?? entry.value) };
  }
  return { value: option, label: String(option) };
}

export function panelPath(name: string, ...rest: string[]): string {
  return ["/api/env-panels", name, ...rest].map((part, i) => (i ? encodeURIComponent(part) : part)).join("/");
}

interface FormProps {
  info: PanelInfo;
  /** Bumped on every load of the panel: inputs show the panel's values again. */
  revision: number;
  state: SessionState;
  busy: boolean;
  onField: (name: string, value: unknown) => void;
  onAction: (action: PanelAction) => void;
}

export function EnvPanelForm({ info, revision, state, busy, onField, onAction }: FormProps) {
  return (
    <div className="env-panel" data-testid="env-panel">
      <div className="panel-fields">
        {info.fields.map((field) => (
          <FieldInput
            key={`${info.name}:${field.name}`}
            panel={info.name}
            field={field}
            value={info.state[field.name]}
            revision={revision}
            onCommit={(value) => onField(field.name, value)}
          />
        ))}
      </div>
      <div className="panel-actions">
        {info.actions.map((action) => (
          <button
            key={action.name}
            type="button"
            className={action.side_effect === "run_start" ? "primary" : ""}
            data-testid={`action-${action.name}`}
            disabled={busy || !enabledIn(action.enabled_when, state)}
            title={`${action.side_effect}, enabled when ${action.enabled_when.replace("_", " ")}`}
            onClick={() => onAction(action)}
          >
            {action.label}
          </button>
        ))}
      </div>
    </div>
  );
}

interface FieldProps {
  panel: string;
  field: PanelField;
  value: unknown;
  revision: number;
  onCommit: (value: unknown) => void;
}

function FieldInput({ panel, field, value, revision, onCommit }: FieldProps) {
  const id = `panel-field-${field.name}`;
  return (
    <label className="panel-field" htmlFor={id} title={field.help || undefined}>
      <span>
        {field.label}
        {field.moves_episode && <span className="muted" title="changing it places another episode"> ⟲</span>}
      </span>
      {field.kind === "select" ? (
        <SelectInput id={id} panel={panel} field={field} value={value} revision={revision} onCommit={onCommit} />
      ) : (
        <DraftInput id={id} field={field} value={value} revision={revision} onCommit={onCommit} />
      )}
    </label>
  );
}

function SelectInput({ id, panel, field, value, revision, onCommit }: FieldProps & { id: string }) {
  const [loaded, setLoaded] = useState<unknown[] | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  useEffect(() => {
    if (!field.dynamic) return;
    let live = true;
    api<{ options: unknown[] }>(panelPath(panel, "options", field.name))
      .then((answer) => live && (setLoaded(answer.options), setProblem(null)))
      .catch((error: unknown) => live && setProblem(errorMessage(error)));
    return () => {
      live = false;
    };
  }, [panel, field.name, field.dynamic, revision]);
  const choices = (field.dynamic ? (loaded ?? []) : (field.options ?? [])).map(choice);
  let index = choices.findIndex((c) => c.value === value);
  if (index < 0 && value !== undefined && value !== null) {
    choices.push({ value, label: String(value) }); // the current value, until its options arrive
    index = choices.length - 1;
  }
  return (
    <>
      <select
        id={id}
        data-testid={`field-${field.name}`}
        value={index < 0 ? "" : String(index)}
        onChange={(event) => {
          const picked = choices[Number(event.target.value)];
          if (picked && picked.value !== value) onCommit(picked.value);
        }}
      >
        {index < 0 && <option value="">—</option>}
        {choices.map((c, i) => (
          <option key={i} value={String(i)}>
            {c.label}
          </option>
        ))}
      </select>
      {problem && <span className="field-problem">{problem}</span>}
    </>
  );
}

/** A number, text or slider input: edited freely, sent when left (blur), on Enter, or when a slider is released. */
function DraftInput({ id, field, value, revision, onCommit }: Omit<FieldProps, "panel"> & { id: string }) {
  const shown = value === null || value === undefined ? "" : String(value);
  const [draft, setDraft] = useState(shown);
  /** Typed into since the last commit: a load of the panel meanwhile leaves the typing alone. */
  const editing = useRef(false);
  useEffect(() => {
    if (!editing.current) setDraft(shown);
  }, [shown, revision]);
  const numeric = field.kind !== "text";
  const commit = () => {
    editing.current = false;
    if (draft === shown) return;
    if (!numeric) return onCommit(draft);
    const number = Number(draft);
    onCommit(draft.trim() === "" || Number.isNaN(number) ? draft : number);
  };
  const kind = field.kind === "slider" ? "range" : field.kind === "number" ? "number" : "text";
  return (
    <span className="draft-input">
      <input
        id={id}
        type={kind}
        data-testid={`field-${field.name}`}
        value={draft}
        min={field.min ?? undefined}
        max={field.max ?? undefined}
        step={field.step ?? undefined}
        onChange={(event) => {
          editing.current = true;
          setDraft(event.target.value);
        }}
        onBlur={commit}
        onPointerUp={field.kind === "slider" ? commit : undefined}
        onKeyDown={(event) => {
          if (event.key === "Enter") commit();
          if (event.key === "Escape") {
            editing.current = false;
            setDraft(shown);
          }
        }}
      />
      {field.kind === "slider" && <span className="muted">{draft}</span>}
    </span>
  );
}
