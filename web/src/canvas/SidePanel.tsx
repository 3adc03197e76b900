// The canvas' right-hand panel: the selected node (its type's description and the config form) or edge, and the
// problems the server found in the last save, validation or run, each naming its node.
import type { Edge } from "@xyflow/react";
import { ConfigForm } from "./ConfigForm";
import type { HyloNode } from "./model";
import type { Problem } from "./types";

type InspectorProps = {
  node: HyloNode | undefined;
  edge: Edge | undefined;
  formKey: number;
  onConfig: (id: string, key: string, value: unknown) => void;
  onDeleteNode: (id: string) => void;
  onDeleteEdge: (id: string) => void;
};

export function Inspector({ node, edge, formKey, onConfig, onDeleteNode, onDeleteEdge }: InspectorProps) {
  if (node) {
    const schema = node.data.view?.schema;
    return (
      <section className="inspector" data-testid="inspector">
        <h3>
          {node.id} <span className="muted">{node.data.nodeType}</span>
        </h3>
        {schema ? (
          <p className="node-description">{schema.description}</p>
        ) : (
          <p className="error-message">Unknown node type: its config is shown as JSON text.</p>
        )}
        <ConfigForm
          key={`${node.id}:${formKey}`}
          schema={schema ? schema.config : undefined}
          config={node.data.config}
          onChange={(key, value) => onConfig(node.id, key, value)}
        />
        <button type="button" onClick={() => onDeleteNode(node.id)} data-testid="delete-node">
          Delete node
        </button>
      </section>
    );
  }
  if (edge) {
    return (
      <section className="inspector" data-testid="inspector">
        <h3>edge</h3>
        <p>
          <code>
            {edge.source}.{edge.sourceHandle}
          </code>{" "}
          →{" "}
          <code>
            {edge.target}.{edge.targetHandle}
          </code>
        </p>
        <button type="button" onClick={() => onDeleteEdge(edge.id)} data-testid="delete-edge">
          Delete edge
        </button>
      </section>
    );
  }
  return (
    <section className="inspector muted">
      Select a node to edit its config. Drag a node type from the palette (or click it) to add one; drag from an
      output (right) to an input (left) to connect them.
    </section>
  );
}

/** What found the problems shown: the last save, validation or run. */
export type ProblemsSource = "save" | "check" | "run";

const FOUND_BY: Record<ProblemsSource, string> = { save: "last save", check: "last validation", run: "last run" };

type ProblemsProps = { problems: Problem[]; source: ProblemsSource; onPick: (node: string) => void };

export function ProblemsPanel({ problems, source, onPick }: ProblemsProps) {
  if (!problems.length) return null;
  return (
    <section className="problems" data-testid="problems-panel">
      <h3>
        {problems.length} problem{problems.length === 1 ? "" : "s"} <span className="muted">({FOUND_BY[source]})</span>
      </h3>
      <ul>
        {problems.map((problem, i) => (
          <li key={i} data-testid="problem-item" data-node={problem.node ?? ""}>
            {problem.node ? (
              <button type="button" className="link" onClick={() => onPick(problem.node!)}>
                {problem.node}
              </button>
            ) : (
              <span className="muted">graph</span>
            )}{" "}
            <span className="rule">{problem.rule}</span> <span className="message">{problem.message}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}
