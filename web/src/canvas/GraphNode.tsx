// The two kinds of node drawn on the canvas: a graph node (its id and type, one handle per port labelled with the
// port's name and wire, the server's problems under it and on the ports they name, its state in the run beside the
// canvas) and the shaded loop region behind the loop band.
import { Handle, Position, useUpdateNodeInternals, type NodeProps } from "@xyflow/react";
import { useEffect } from "react";
import type { HyloNode, NodeRun, PortView, RegionNode } from "./model";

function PortRow({ node, port, side }: { node: string; port: PortView; side: "in" | "out" }) {
  const title = `${port.name} (${port.wire})${port.required ? ", required" : ""}${
    port.description ? `: ${port.description}` : ""
  }${port.unknown ? " — not a port of this node type" : ""}${port.problem ? ` — ${port.problem}` : ""}`;
  const classes = ["port", `port-${side}`];
  if (port.unknown) classes.push("port-unknown");
  if (port.problem) classes.push("port-problem");
  return (
    <div
      className={classes.join(" ")}
      title={title}
      data-testid={port.problem ? `port-problem-${node}-${port.name}` : undefined}
    >
      <Handle
        type={side === "in" ? "target" : "source"}
        position={side === "in" ? Position.Left : Position.Right}
        id={port.name}
        className={`wire-${port.wire}`}
      />
      <span className="port-name">
        {port.name}
        {side === "in" && port.required ? "*" : ""}
      </span>
      <span className="port-wire">{port.wire}</span>
    </div>
  );
}

function runTitle(run: NodeRun): string {
  return run.fires ? `${run.state}, fired ${run.fires} time${run.fires === 1 ? "" : "s"}` : run.state;
}

export function GraphNode({ id, data, selected, positionAbsoluteX, positionAbsoluteY }: NodeProps<HyloNode>) {
  const view = data.view;
  const unknown = view?.unknown ?? false;
  const problems = view?.problems ?? [];
  const portKey = [...(view?.inputs ?? []), ...(view?.outputs ?? [])].map((port) => port.name).join(",");
  const updateNodeInternals = useUpdateNodeInternals();
  useEffect(() => updateNodeInternals(id), [id, portKey, updateNodeInternals]);
  const classes = ["graph-node", `role-${view?.schema?.role ?? "unknown"}`];
  if (unknown) classes.push("unknown");
  if (problems.length) classes.push("has-problems");
  if (selected) classes.push("selected");
  const run = view?.run;
  if (run) classes.push("run", `run-${run.state}`);
  return (
    <div
      className={classes.join(" ")}
      data-testid={`node-${id}`}
      data-position={`${Math.round(positionAbsoluteX)},${Math.round(positionAbsoluteY)}`}
      data-state={run?.state}
      title={run ? runTitle(run) : undefined}
    >
      <div className="node-head">
        <span className="node-id">{id}</span>
        <span className="node-type">{unknown ? `unknown · ${data.nodeType}` : data.nodeType}</span>
        {run && (
          <span className="node-state" data-testid={`node-state-${id}`}>
            {run.state}
            {run.fires > 1 ? ` ×${run.fires}` : ""}
          </span>
        )}
      </div>
      {unknown && (
        <div className="node-unknown" data-testid={`node-unknown-${id}`}>
          unknown node type {JSON.stringify(data.nodeType)}: none of the server's nodesets has it
        </div>
      )}
      <div className="node-ports">
        <div className="ports-in">
          {view?.inputs.map((port) => <PortRow key={port.name} node={id} port={port} side="in" />)}
        </div>
        <div className="ports-out">
          {view?.outputs.map((port) => <PortRow key={port.name} node={id} port={port} side="out" />)}
        </div>
      </div>
      {problems.length > 0 && (
        <ul className="node-problems" data-testid={`node-error-${id}`}>
          {problems.map((problem, i) => (
            <li key={i}>
              <span className="rule">{problem.rule}</span> <span className="message">{problem.message}</span>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function LoopRegion({ data }: NodeProps<RegionNode>) {
  return (
    <div className="loop-region" data-testid="loop-region" data-count={data.count}>
      <span className="loop-label">{data.label}</span>
    </div>
  );
}
