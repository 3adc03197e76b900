// The button that cancels a run's queued or running job (the request answers once the job has ended).
import { useState } from "react";
import { api, errorMessage } from "../api";
import { runPath } from "./types";

export function CancelButton({ runId, onDone }: { runId: string; onDone: () => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const cancel = async () => {
    setBusy(true);
    setError(null);
    try {
      await api(runPath(runId, "/cancel"), { method: "POST" });
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(false);
      onDone();
    }
  };
  return (
    <span className="cancel">
      <button type="button" onClick={cancel} disabled={busy} data-testid={`cancel-${runId}`}>
        {busy ? "Cancelling…" : "Cancel"}
      </button>
      {error && (
        <span className="error-message" data-testid="cancel-error">
          {error}
        </span>
      )}
    </span>
  );
}
