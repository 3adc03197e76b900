// The canvas' toolbar: the graph selector (saved graphs and built-in examples), the name to save under, Save, and
// the open graph's Validate, Run and Layout.
import type { GraphSummary } from "../catalog";

/** A line shown above the canvas: the outcome of the last load or save. */
export type Notice = { kind: "error" | "info"; text: string };

type Props = {
  graphs: GraphSummary[];
  loaded: string | null;
  name: string;
  saving: boolean;
  /** The canvas has edits not saved yet. */
  dirty: boolean;
  /** A validation or a run's start is on its way. */
  checking: boolean;
  onOpen: (graph: string) => void;
  onName: (name: string) => void;
  onSave: () => void;
  onValidate: () => void;
  onRun: () => void;
  onLayout: () => void;
};

function label(graph: GraphSummary): string {
  if (graph.error) return `${graph.name} (unreadable)`;
  if (graph.builtin) return `${graph.name} (example)`;
  if (graph.shadows_builtin) return `${graph.name} (saved copy of the example)`;
  return graph.name;
}

export function Toolbar(props: Props) {
  const { graphs, loaded, name, saving, dirty, checking, onOpen, onName, onSave } = props;
  const listed = loaded === null || loaded === "" || graphs.some((graph) => graph.name === loaded);
  return (
    <form
      className="canvas-toolbar"
      onSubmit={(event) => {
        event.preventDefault();
        onSave();
      }}
    >
      <label>
        Graph{" "}
        <select value={loaded ?? ""} onChange={(e) => onOpen(e.target.value)} data-testid="graph-select">
          <option value="">(new graph)</option>
          {!listed && loaded && <option value={loaded}>{loaded}</option>}
          {graphs.map((graph) => (
            <option
              key={graph.name}
              value={graph.name}
              title={graph.error ?? graph.description}
              disabled={!!graph.error}
            >
              {label(graph)}
            </option>
          ))}
        </select>
      </label>
      <label>
        Save as{" "}
        <input
          value={name}
          onChange={(e) => onName(e.target.value)}
          placeholder="graph name"
          spellCheck={false}
          data-testid="graph-name"
        />
      </label>
      <button type="submit" className="primary" disabled={saving} data-testid="save-graph">
        {saving ? "Saving…" : "Save"}
      </button>
      {dirty && (
        <span className="unsaved muted" data-testid="unsaved" title="the canvas has edits that are not saved">
          unsaved
        </span>
      )}
      <span className="toolbar-gap" />
      <button type="button" onClick={props.onLayout} data-testid="layout-graph" title="lay the graph out left to right">
        Layout
      </button>
      <button type="button" onClick={props.onValidate} disabled={checking} data-testid="validate-graph"
        title="check the open graph on the server, without saving it">
        Validate
      </button>
      <button type="button" className="primary" onClick={props.onRun} disabled={checking} data-testid="run-graph"
        title="run the open graph (as it is, unsaved edits included) on its placement, beside the canvas">
        Run
      </button>
    </form>
  );
}
