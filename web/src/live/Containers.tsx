// The state containers' values at the selected step (from the trace's `container.checkpoint` events), else at the
// latest checkpoint, else as the session last reported them.
import { checkpointAt } from "./trace";

interface Props {
  checkpoints: Map<number, Record<string, unknown>>;
  selected: number | null;
  /** The session's own report (`GET /api/sessions/{id}` containers), for when the trace holds no checkpoint. */
  reported: Record<string, unknown> | null;
}

export function Containers({ checkpoints, selected, reported }: Props) {
  const found = checkpointAt(checkpoints, selected);
  const values = found ? found.values : selected === null ? (reported ?? {}) : {};
  const names = Object.keys(values).sort();
  let where: string;
  if (found && (found.step === selected || selected === null)) where = `at step ${found.step}`;
  else if (found) where = `at step ${found.step} (the last checkpoint before step ${selected})`;
  else if (selected !== null) where = `no checkpoint at or before step ${selected}`;
  else where = "as the session reported them";
  return (
    <section className="live-card" data-testid="containers">
      <h3>
        State containers <span className="muted" data-testid="containers-step">{where}</span>
      </h3>
      {names.length === 0 ? (
        <div className="muted">no state containers (a graph with containers checkpoints them every iteration)</div>
      ) : (
        <table className="containers">
          <tbody>
            {names.map((name) => (
              <tr key={name} data-testid={`container-${name}`}>
                <th>{name}</th>
                <td>
                  <code>{JSON.stringify(values[name])}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
