// The form that queues an evaluation (`POST /api/eval/v2/start`). The server is the judge of every field: a 422 is
// shown as `field: message`. A `module:Class` agent is offered only when the server takes one (`--allow-import`).
import { useEffect, useMemo, useState, type FormEvent, type ReactNode } from "react";
import { api, errorMessage } from "../api";
import { href } from "../router";
import type { AgentInfo } from "../catalog";
import { EVAL_API, type BenchmarkInfo } from "./types";

interface Started {
  job_id: string;
  run_id: string;
  state: string;
}

interface Fields {
  benchmark: string;
  split: string;
  tasks: string[];
  envArgs: string;
  agent: string;
  agentArgs: string;
  episodes: string;
  seed: string;
  workers: string;
  video: string;
  maxSteps: string;
  runId: string;
}

const INITIAL: Fields = {
  benchmark: "",
  split: "",
  tasks: [],
  envArgs: "",
  agent: "random",
  agentArgs: "",
  episodes: "10",
  seed: "0",
  workers: "1",
  video: "0",
  maxSteps: "",
  runId: "",
};

/** A number field as sent: left out when empty, a number when it reads as one, else the text (the server says
 * what is wrong with it). */
function numberField(text: string): number | string | undefined {
  const trimmed = text.trim();
  if (!trimmed) return undefined;
  const value = Number(trimmed);
  return Number.isFinite(value) ? value : trimmed;
}

/** A JSON object field as sent: left out when empty; text that is not JSON is refused here, naming the field. */
function jsonField(name: string, text: string, example: string): unknown {
  if (!text.trim()) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${name}: not valid JSON (write an object such as ${example})`);
  }
}

function requestBody(fields: Fields): Record<string, unknown> {
  const body: Record<string, unknown> = { benchmark: fields.benchmark, agent: fields.agent.trim() };
  if (fields.split) body.split = fields.split;
  if (fields.tasks.length) body.tasks = fields.tasks;
  const envArgs = jsonField("env_args", fields.envArgs, '{"obs_type": "pixels"}');
  if (envArgs !== undefined) body.env_args = envArgs;
  const agentArgs = jsonField("agent_args", fields.agentArgs, '{"chunk": 2}');
  if (agentArgs !== undefined) body.agent_args = agentArgs;
  const numbers: [string, string][] = [
    ["episodes", fields.episodes],
    ["seed", fields.seed],
    ["workers", fields.workers],
    ["video", fields.video],
    ["max_steps", fields.maxSteps],
  ];
  for (const [name, text] of numbers) {
    const value = numberField(text);
    if (value !== undefined) body[name] = value;
  }
  if (fields.runId.trim()) body.run_id = fields.runId.trim();
  return body;
}

function useCatalog() {
  const [benchmarks, setBenchmarks] = useState<BenchmarkInfo[]>([]);
  const [agents, setAgents] = useState<AgentInfo[]>([]);
  /** Whether the server takes `module:Class` agents (`hylo serve --allow-import`); false from one that predates it. */
  const [importPaths, setImportPaths] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    Promise.all([
      api<{ benchmarks: BenchmarkInfo[] }>("/api/benchmarks"),
      api<{ agents: AgentInfo[]; import_paths?: boolean }>("/api/agents"),
    ])
      .then(([b, a]) => {
        setBenchmarks(b.benchmarks);
        setAgents(a.agents);
        setImportPaths(a.import_paths === true);
      })
      .catch((e: unknown) => setError(errorMessage(e)));
  }, []);
  return { benchmarks, agents, importPaths, error };
}

export function StartForm({ onStarted }: { onStarted: () => void }) {
  const { benchmarks, agents, importPaths, error: catalogError } = useCatalog();
  const [fields, setFields] = useState<Fields>(INITIAL);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [started, setStarted] = useState<Started | null>(null);
  const set = (patch: Partial<Fields>) => setFields((current) => ({ ...current, ...patch }));

  useEffect(() => {
    if (!fields.benchmark && benchmarks.length) {
      const first = benchmarks.find((b) => b.available) ?? benchmarks[0];
      set({ benchmark: first.name, split: first.default_split ?? "" });
    }
  }, [benchmarks, fields.benchmark]);

  const benchmark = benchmarks.find((b) => b.name === fields.benchmark);
  const tasks = useMemo(
    () => benchmark?.splits.find((s) => s.name === fields.split)?.tasks.map((t) => t.name) ?? [],
    [benchmark, fields.split],
  );

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    setStarted(null);
    setBusy(true);
    try {
      const answer = await api<Started>(`${EVAL_API}/start`, { method: "POST", json: requestBody(fields) });
      setStarted(answer);
      onStarted();
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="panel start-form" data-testid="start-form" onSubmit={submit} noValidate>
      <h3>Start an evaluation</h3>
      {catalogError && <div className="error-message">{catalogError}</div>}
      <Field label="Benchmark">
        <select
          data-testid="start-benchmark"
          value={fields.benchmark}
          onChange={(e) => {
            const next = benchmarks.find((b) => b.name === e.target.value);
            set({ benchmark: e.target.value, split: next?.default_split ?? "", tasks: [] });
          }}
        >
          {benchmarks.map((b) => (
            <option key={b.name} value={b.name} disabled={!b.available} title={b.reason ?? undefined}>
              {b.display_name ?? b.name}
            </option>
          ))}
        </select>
      </Field>
      <Field label="Split">
        <select data-testid="start-split" value={fields.split} onChange={(e) => set({ split: e.target.value, tasks: [] })}>
          {benchmark?.splits.map((s) => (
            <option key={s.name} value={s.name}>
              {s.name} ({s.tasks.length} tasks)
            </option>
          ))}
        </select>
      </Field>
      <Field label="Tasks" hint="none selected: every task of the split">
        <select
          multiple
          size={Math.min(6, Math.max(2, tasks.length))}
          data-testid="start-tasks"
          value={fields.tasks}
          onChange={(e) => set({ tasks: Array.from(e.target.selectedOptions, (o) => o.value) })}
        >
          {tasks.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
      </Field>
      <Field label="Env options (JSON)" hint="the benchmark's options, as -E gives them">
        <input
          data-testid="start-env-args"
          placeholder='{"obs_type": "pixels"}'
          value={fields.envArgs}
          onChange={(e) => set({ envArgs: e.target.value })}
        />
      </Field>
      <Field
        label="Agent"
        hint={importPaths ? "a registered agent, or module:Class importable by the server" : "a registered agent"}
      >
        <input
          list="start-agents"
          data-testid="start-agent"
          placeholder={importPaths ? "random, or mypkg.agents:MyAgent" : "random"}
          value={fields.agent}
          onChange={(e) => set({ agent: e.target.value })}
        />
        {importPaths && (
          <span className="muted hint" data-testid="start-import-allowed">
            This server imports the agents jobs name (hylo serve --allow-import): from its environment and the
            directory it was started in.
          </span>
        )}
        <datalist id="start-agents">
          {agents
            .filter((a) => a.available)
            .map((a) => (
              <option key={a.name} value={a.name}>
                {a.description}
              </option>
            ))}
        </datalist>
      </Field>
      <Field label="Agent args (JSON)">
        <input
          data-testid="start-agent-args"
          placeholder='{"chunk": 2}'
          value={fields.agentArgs}
          onChange={(e) => set({ agentArgs: e.target.value })}
        />
      </Field>
      <div className="field-row">
        <NumberField label="Episodes" testId="start-episodes" value={fields.episodes} onChange={(v) => set({ episodes: v })} />
        <NumberField label="Seed" testId="start-seed" value={fields.seed} onChange={(v) => set({ seed: v })} />
        <NumberField label="Workers" testId="start-workers" value={fields.workers} onChange={(v) => set({ workers: v })} />
      </div>
      <div className="field-row">
        <NumberField label="Videos per task" testId="start-video" value={fields.video} onChange={(v) => set({ video: v })} />
        <NumberField
          label="Max steps"
          testId="start-max-steps"
          value={fields.maxSteps}
          placeholder="default"
          onChange={(v) => set({ maxSteps: v })}
        />
      </div>
      <Field label="Run id" hint="empty: benchmark, agent and digest">
        <input data-testid="start-run-id" value={fields.runId} onChange={(e) => set({ runId: e.target.value })} />
      </Field>
      <button type="submit" className="primary" disabled={busy || !fields.benchmark} data-testid="start-submit">
        {busy ? "Starting…" : "Start"}
      </button>
      {error && (
        <div className="error-message" data-testid="start-error">
          {error}
        </div>
      )}
      {started && (
        <div className="start-ok" data-testid="start-ok">
          Job <span className="mono">{started.job_id}</span> {started.state}: run{" "}
          <a className="mono" href={href(["runs", started.run_id])} data-testid="start-run-link">
            {started.run_id}
          </a>
        </div>
      )}
    </form>
  );
}

function Field({ label, hint, children }: { label: string; hint?: string; children: ReactNode }) {
  return (
    <label className="field">
      <span className="field-label">
        {label}
        {hint && <span className="muted"> — {hint}</span>}
      </span>
      {children}
    </label>
  );
}

function NumberField(props: {
  label: string;
  testId: string;
  value: string;
  placeholder?: string;
  onChange: (value: string) => void;
}) {
  return (
    <label className="field">
      <span className="field-label">{props.label}</span>
      <input
        inputMode="numeric"
        data-testid={props.testId}
        value={props.value}
        placeholder={props.placeholder}
        onChange={(e) => props.onChange(e.target.value)}
      />
    </label>
  );
}
