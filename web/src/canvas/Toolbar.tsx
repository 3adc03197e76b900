// The canvas' toolbar: the graph selector (saved graphs and built-in examples), the name to save under, Save.
import type { GraphSummary } from "../catalog";

/** A line shown above the canvas: the outcome of the last load or save. */
export type Notice = { kind: "error" | "info"; text: string };

type Props = {
  graphs: GraphSummary[];
  loaded: string | null;
  name: string;
  saving: boolean;
  onOpen: (graph: string) => void;
  onName: (name: string) => void;
  onSave: () => void;
};

function label(graph: GraphSummary): string {
  if (graph.error) return `${graph.name} (unreadable)`;
  if (graph.builtin) return `${graph.name} (example)`;
  if (graph.shadows_builtin) return `${graph.name} (saved copy of the example)`;
  return graph.name;
}

export function Toolbar({ graphs, loaded, name, saving, onOpen, onName, onSave }: Props) {
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
    </form>
  );
}
