// A progress bar of episodes done over planned, with the numbers written beside it.

export function ProgressBar({ done, planned, testId }: { done: number; planned: number; testId?: string }) {
  const fraction = planned > 0 ? Math.min(1, done / planned) : 0;
  return (
    <span className="progress" data-testid={testId} data-done={done} data-planned={planned}>
      <span className="progress-track">
        <span className="progress-fill" style={{ width: `${(fraction * 100).toFixed(1)}%` }} />
      </span>
      <span className="progress-text">
        {done}/{planned}
      </span>
    </span>
  );
}

/** A run or job status word in its colour. */
export function StatusBadge({ status, testId }: { status: string; testId?: string }) {
  return (
    <span className={`badge badge-${status} status-${status}`} data-testid={testId}>
      {status}
    </span>
  );
}
