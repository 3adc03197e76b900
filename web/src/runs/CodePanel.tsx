// The agent's code a run ran — its identity is part of the run's: other code is another run, never an extension of
// this one — and, against the latest other run of the same configuration, which files changed.
import { href } from "../router";
import { when } from "./format";
import type { AgentCode, CodeChange, CodeChanges, CodeIdentity, CodePart } from "./types";

export function CodePanel({ code, changes }: { code: CodeIdentity | null; changes: CodeChanges | null }) {
  return (
    <section className="panel code-panel" data-testid="code-panel">
      <h3>Agent code</h3>
      {code ? (
        <>
          <p>
            Code digest{" "}
            <span className="mono" data-testid="code-digest">
              {code.digest}
            </span>{" "}
            <span className="muted">(part of the run's digest: other code makes another run)</span>
          </p>
          {code.agents.map((agent) => (
            <AgentParts key={`${agent.node ?? ""}:${agent.agent}`} agent={agent} />
          ))}
        </>
      ) : (
        <p className="muted" data-testid="code-digest">
          Not recorded: this run was made before runs recorded their agent's code.
        </p>
      )}
      {code && <Changes changes={changes} />}
    </section>
  );
}

type Part<K extends CodePart["kind"]> = Extract<CodePart, { kind: K }>;

function partsOf<K extends CodePart["kind"]>(agent: AgentCode, kind: K): Part<K>[] {
  return agent.parts.filter((part): part is Part<K> => part.kind === kind);
}

/** One agent's sources (its own modules first), the distributions they import and its argument files. */
function AgentParts({ agent }: { agent: AgentCode }) {
  const own = new Set(agent.modules.map((name) => name.replace(/\./g, "/")));
  const isOwn = (path: string) => own.has(modulePath(path));
  const sources = [...partsOf(agent, "source")].sort((a, b) => Number(isOwn(b.path)) - Number(isOwn(a.path)));
  const distributions = partsOf(agent, "distribution");
  const files = partsOf(agent, "argument");
  return (
    <dl className="run-facts" data-testid="code-agent" data-agent={agent.agent}>
      <dt>Agent</dt>
      <dd className="mono">
        {agent.node ? `${agent.node}: ` : ""}
        {agent.agent}
      </dd>
      <dt>Source files</dt>
      <dd data-testid="code-sources" data-count={sources.length}>
        <Listing
          testId="code-source"
          empty="none (the agent's code is all in installed distributions)"
          summary={sourcesSummary(sources.filter((s) => isOwn(s.path)).map((s) => s.path), sources.length)}
          entries={sources.map((s) => ({ name: s.path, detail: s.sha256.slice(0, 12), title: s.sha256 }))}
        />
      </dd>
      <dt>Distributions</dt>
      <dd data-testid="code-distributions" data-count={distributions.length}>
        <Listing
          testId="code-distribution"
          empty="none"
          entries={distributions.map((d) => ({ name: `${d.name}==${d.version}`, detail: "", title: "" }))}
        />
      </dd>
      <dt>Argument files</dt>
      <dd data-testid="code-files" data-count={files.length}>
        <Listing
          testId="code-file"
          empty="none"
          entries={files.map((f) => ({
            name: `${f.arg}=${f.path}`,
            detail: f.sha256.slice(0, 12),
            title: f.method === "stat" ? "too large to read: by its files' names, sizes and times" : f.sha256,
          }))}
        />
      </dd>
    </dl>
  );
}

/** The module a source file holds, as a path: `pkg/mod` for `pkg/mod.py`, `pkg` for `pkg/__init__.py`. */
function modulePath(path: string): string {
  const slash = path.lastIndexOf("/");
  const folder = slash >= 0 ? path.slice(0, slash) : "";
  const stem = path.slice(slash + 1).split(".")[0];
  if (stem === "__init__") return folder;
  return folder ? `${folder}/${stem}` : stem;
}

interface Entry {
  name: string;
  detail: string;
  title: string;
}

/** `myagents.py + 34 imported`: the agent's own files, and how many more its imports reach. */
function sourcesSummary(own: string[], total: number): string {
  const imported = total - own.length;
  const more = imported ? `${own.length ? " + " : ""}${imported} imported` : "";
  return `${own.join(", ")}${more}`;
}

/** Names with a short hash beside each; a long list starts folded, under `summary` (default: how many). */
function Listing(props: { entries: Entry[]; empty: string; testId: string; summary?: string }) {
  const { entries, empty, testId } = props;
  if (!entries.length) return <span className="muted">{empty}</span>;
  return (
    <details open={entries.length <= 8}>
      <summary className="muted" data-testid={`${testId}-summary`}>
        {props.summary ?? entries.length}
      </summary>
      <ul className="code-files">
        {entries.map((entry) => (
          <li key={entry.name} className="mono" data-testid={testId} title={entry.title || undefined}>
            {entry.name}
            {entry.detail && <span className="muted"> {entry.detail}</span>}
          </li>
        ))}
      </ul>
    </details>
  );
}

function changeText(change: CodeChange): string {
  const what = change.kind === "argument" ? `argument ${change.name}` : change.name;
  if (change.kind === "distribution" && change.change === "changed") return `${what} ${change.was} → ${change.now}`;
  return what;
}

/** `1 part of the code differs`, `3 parts of the code differ`. */
function differ(n: number): string {
  return n === 1 ? "1 part of the code differs" : `${n} parts of the code differ`;
}

function Changes({ changes }: { changes: CodeChanges | null }) {
  if (!changes) {
    return (
      <p className="muted" data-testid="code-changes">
        No other run of this configuration to compare its code with.
      </p>
    );
  }
  const n = changes.changes.length;
  return (
    <div data-testid="code-changes" data-against={changes.against}>
      <p>
        Against run{" "}
        <a className="mono" href={href(["runs", changes.against])} data-testid="code-against">
          {changes.against}
        </a>{" "}
        <span className="muted">(same configuration, made {when(changes.against_created_at)})</span>:{" "}
        <strong data-testid="code-verdict">
          {changes.same_code ? "the same code" : differ(n)}
        </strong>
      </p>
      {n > 0 && (
        <ul className="code-files">
          {changes.changes.map((change) => (
            <li
              key={`${change.kind}:${change.name}`}
              className="mono"
              data-testid="code-change"
              data-change={change.change}
              data-name={change.name}
            >
              <span className={`code-change-${change.change}`}>{change.change}</span> {changeText(change)}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
