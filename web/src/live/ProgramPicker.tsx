// What a panel's session runs: a registered agent (in the canonical loop) or a saved graph on the panel's benchmark,
// and an optional step budget per execution. A session is made from this when Play or Step needs one.
import { useEffect, useState } from "react";
import { api, errorMessage } from "../api";
import type { AgentInfo, GraphSummary } from "../catalog";
import type { SessionInfo } from "./types";

export interface Program {
  kind: "agent" | "graph";
  name: string;
}

export const DEFAULT_PROGRAM: Program = { kind: "agent", name: "expert" };

export function programKey(program: Program): string {
  return `${program.kind}:${program.name}`;
}

/** The program a session runs. */
export function programOf(session: SessionInfo): Program {
  return session.agent ? { kind: "agent", name: session.agent } : { kind: "graph", name: session.graph };
}

interface Catalog {
  agents: AgentInfo[];
  graphs: GraphSummary[];
  problem: string | null;
}

/** The registered agents and the saved graphs (loaded once). */
export function useCatalog(): Catalog {
  const [catalog, setCatalog] = useState<Catalog>({ agents: [], graphs: [], problem: null });
  useEffect(() => {
    let live = true;
    // The agents are needed; without the saved graphs the agents can still be chosen (and the page says why the
    // graphs are missing).
    let graphsProblem: string | null = null;
    Promise.all([
      api<{ agents: AgentInfo[] }>("/api/agents"),
      api<{ graphs: GraphSummary[] }>("/api/graphs").catch((error: unknown) => {
        graphsProblem = `the saved graphs could not be loaded: ${errorMessage(error)}`;
        return { graphs: [] as GraphSummary[] };
      }),
    ])
      .then(([a, g]) => live && setCatalog({ agents: a.agents, graphs: g.graphs, problem: graphsProblem }))
      .catch(
        (error: unknown) =>
          live && setCatalog((c) => ({ ...c, problem: `the agents could not be loaded: ${errorMessage(error)}` })),
      );
    return () => {
      live = false;
    };
  }, []);
  return catalog;
}

interface PickerProps {
  catalog: Catalog;
  benchmark: string | null;
  program: Program;
  stepBudget: string;
  /** The panel's own budget, shown when none is given. */
  defaultBudget: unknown;
  disabled: boolean;
  onProgram: (program: Program) => void;
  onStepBudget: (value: string) => void;
}

export function ProgramPicker(props: PickerProps) {
  const { catalog, benchmark, program, stepBudget, defaultBudget, disabled } = props;
  const graphs = catalog.graphs.filter((g) => !g.error && (!benchmark || g.placement?.benchmark === benchmark));
  const known =
    (program.kind === "agent" && catalog.agents.some((a) => a.name === program.name)) ||
    (program.kind === "graph" && graphs.some((g) => g.name === program.name));
  return (
    <div className="program-picker">
      <label className="panel-field">
        <span>Agent</span>
        <select
          data-testid="agent-select"
          value={programKey(program)}
          disabled={disabled}
          onChange={(event) => {
            const [kind, ...name] = event.target.value.split(":");
            props.onProgram({ kind: kind === "graph" ? "graph" : "agent", name: name.join(":") });
          }}
        >
          {!known && <option value={programKey(program)}>{program.name}</option>}
          <optgroup label="Agents">
            {catalog.agents.map((agent) => (
              <option
                key={agent.name}
                value={programKey({ kind: "agent", name: agent.name })}
                disabled={!agent.available}
                title={agent.reason ?? agent.description}
              >
                {agent.name}
              </option>
            ))}
          </optgroup>
          {graphs.length > 0 && (
            <optgroup label="Saved graphs">
              {graphs.map((graph) => (
                <option key={graph.name} value={programKey({ kind: "graph", name: graph.name })} title={graph.description}>
                  {graph.name}
                </option>
              ))}
            </optgroup>
          )}
        </select>
      </label>
      <label className="panel-field">
        <span>Step budget</span>
        <input
          type="number"
          min={1}
          step={1}
          data-testid="step-budget"
          value={stepBudget}
          disabled={disabled}
          placeholder={defaultBudget === undefined || defaultBudget === null ? "default" : String(defaultBudget)}
          onChange={(event) => props.onStepBudget(event.target.value)}
        />
      </label>
      {catalog.problem && <div className="error-message">{catalog.problem}</div>}
    </div>
  );
}
