// The palette: every node type of `GET /api/nodes`, grouped by nodeset, to drag onto the canvas or add with a click;
// the nodesets the server cannot load are listed with the reason.
import { useState, type DragEvent } from "react";
import type { NodesAnswer } from "./types";

export const DRAG_TYPE = "application/x-hylo-node-type";

type Props = { catalog: NodesAnswer | null; onAdd: (type: string) => void };

export function Palette({ catalog, onAdd }: Props) {
  const [filter, setFilter] = useState("");
  const wanted = filter.trim().toLowerCase();
  const start = (event: DragEvent, type: string) => {
    event.dataTransfer.setData(DRAG_TYPE, type);
    event.dataTransfer.setData("text/plain", type);
    event.dataTransfer.effectAllowed = "copy";
  };
  return (
    <aside className="palette" data-testid="palette">
      <input
        type="search"
        placeholder="filter node types"
        value={filter}
        onChange={(e) => setFilter(e.target.value)}
        data-testid="palette-filter"
      />
      {!catalog && <p className="muted">loading node types…</p>}
      {catalog?.nodesets.map((group) => {
        const nodes = group.nodes.filter((node) => !wanted || node.type.toLowerCase().includes(wanted));
        if (!nodes.length) return null;
        return (
          <details key={group.nodeset} open className="palette-group" data-testid={`palette-group-${group.nodeset}`}>
            <summary title={group.description}>
              {group.nodeset} <span className="muted">({group.owner})</span>
            </summary>
            {nodes.map((node) => (
              <div
                key={node.type}
                className="palette-item"
                role="button"
                tabIndex={0}
                draggable
                onDragStart={(event) => start(event, node.type)}
                onClick={() => onAdd(node.type)}
                onKeyDown={(event) => {
                  if (event.key === "Enter" || event.key === " ") onAdd(node.type);
                }}
                title={`${node.description}\n\nDrag onto the canvas, or click to add.`}
                data-testid={`palette-item-${node.type}`}
              >
                {node.type}
              </div>
            ))}
          </details>
        );
      })}
      {catalog?.unavailable.map((entry) => (
        <div key={entry.nodeset} className="palette-unavailable" title={entry.reason}>
          {entry.nodeset}: unavailable ({entry.reason})
        </div>
      ))}
    </aside>
  );
}
