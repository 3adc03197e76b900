// A hook that loads one record once (an A/B comparison, a sweep), again when its path changes.
import { useEffect, useState } from "react";
import { api, errorMessage } from "../api";

export interface Loaded<T> {
  record: T | null;
  error: string | null;
}

/** The answer of `GET path`, or why it failed; an answer that comes after the path changed is dropped. */
export function useRecord<T>(path: string): Loaded<T> {
  const [record, setRecord] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let cancelled = false;
    api<T>(path)
      .then((answer) => !cancelled && setRecord(answer))
      .catch((e: unknown) => !cancelled && setError(errorMessage(e)));
    return () => {
      cancelled = true;
    };
  }, [path]);

  return { record, error };
}
