// Load data for a view, optionally polling, with loading and error state; `reload` fetches again now.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

export interface Loaded<T> {
  data: T | null;
  error: string | null;
  loading: boolean;
  reload: () => void;
}

export function useData<T>(load: () => Promise<T>, deps: unknown[], pollMs?: number | null): Loaded<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const generation = useRef(0);
  const run = useCallback(() => {
    const mine = ++generation.current;
    load()
      .then((d) => {
        if (mine !== generation.current) return;
        setData(d);
        setError(null);
      })
      .catch((e: Error) => mine === generation.current && setError(e.message))
      .finally(() => mine === generation.current && setLoading(false));
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
  useEffect(() => {
    setLoading(true);
    run();
    if (!pollMs) return () => generation.current++;
    const timer = setInterval(run, pollMs);
    return () => {
      clearInterval(timer);
      generation.current++;
    };
  }, [run, pollMs]);
  return { data, error, loading, reload: run };
}
