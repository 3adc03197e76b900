// The runs dashboard: the list of runs with the queue and the start form (`#/runs`), one run (`#/runs/<id>`, with an
// episode open: `?episode=<id>`) and the comparison of two runs (`#/compare?a=&b=`), an A/B comparison's record
// (`#/ab/<id>`) and a latency sweep's (`#/sweeps/<id>`).
import type { Route } from "../router";
import { ABPage } from "./ABPage";
import { ComparePage } from "./ComparePage";
import { RunPage } from "./RunPage";
import { RunsOverview } from "./RunsOverview";
import { SweepPage } from "./SweepPage";
import "./runs.css";

export function RunsPage({ route }: { route: Route }) {
  if (route.parts[0] === "compare") {
    return <ComparePage a={route.query.get("a") ?? ""} b={route.query.get("b") ?? ""} />;
  }
  if (route.parts[0] === "ab" && route.parts[1]) return <ABPage key={route.parts[1]} abId={route.parts[1]} />;
  if (route.parts[0] === "sweeps" && route.parts[1]) {
    return <SweepPage key={route.parts[1]} sweepId={route.parts[1]} />;
  }
  const runId = route.parts[1];
  if (runId) return <RunPage key={runId} runId={runId} episodeId={route.query.get("episode")} />;
  return <RunsOverview />;
}
