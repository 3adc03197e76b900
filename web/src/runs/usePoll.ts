// A hook that loads something now and again every `intervalMs` (fast while something runs, slow otherwise).
import { useCallback, useEffect, useRef, useState } from "react";
import { errorMessage } from "../api";

export interface Polled<T> {
  data: T | null;
  error: string | null;
  reload: () => void;
}

/** Load with `load` at once, whenever `key` changes, and every `intervalMs(data)` ms after each answer. */
export function usePoll<T>(key: string, load: () => Promise<T>, intervalMs: (data: T | null) => number): Polled<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  const intervalRef = useRef(intervalMs);
  loadRef.current = load;
  intervalRef.current = intervalMs;

  useEffect(() => {
    setData(null);
    setError(null);
  }, [key]);

  useEffect(() => {
    let cancelled = false;
    let timer: number | undefined;
    /** The last answer had: a failed load keeps its pace (a run that was running is polled fast still). */
    let latest: T | null = null;
    const run = async () => {
      try {
        const answer = await loadRef.current();
        if (cancelled) return;
        latest = answer;
        setData(answer);
        setError(null);
      } catch (e) {
        if (cancelled) return;
        setError(errorMessage(e));
      }
      timer = window.setTimeout(run, intervalRef.current(latest));
    };
    void run();
    return () => {
      cancelled = true;
      window.clearTimeout(timer);
    };
  }, [key, tick]);

  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, reload };
}
