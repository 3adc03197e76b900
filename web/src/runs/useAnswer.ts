// One GET of the API, read again whenever its path or the run's version (episodes done) changes; an older answer
// never replaces a newer one.
import { useEffect, useState } from "react";
import { api, errorMessage } from "../api";

export interface Answer<T> {
  /** The latest answer, and the path it answers. */
  data: { path: string; value: T } | null;
  error: string | null;
}

export function useAnswer<T>(path: string, version: number): Answer<T> {
  const [data, setData] = useState<{ path: string; value: T } | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let cancelled = false;
    api<T>(path)
      .then((value) => {
        if (cancelled) return;
        setData({ path, value });
        setError(null);
      })
      .catch((e: unknown) => !cancelled && setError(errorMessage(e)));
    return () => {
      cancelled = true;
    };
  }, [path, version]);
  return { data, error };
}
