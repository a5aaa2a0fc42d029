// Hash routes (#/jobs/<id>?x=y): the server serves one page at /, so every view is a fragment.
import { useEffect, useState } from 'preact/hooks';

export interface Route {
  /** Path segments after '#/', e.g. ['jobs', '<id>']. */
  parts: string[];
  query: URLSearchParams;
}

export function parseHash(hash: string): Route {
  const body = hash.replace(/^#\/?/, '');
  const [path, search = ''] = body.split('?', 2);
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(search) };
}

export function href(parts: string[], query?: Record<string, string>): string {
  const q = query ? new URLSearchParams(query).toString() : '';
  return `#/${parts.map(encodeURIComponent).join('/')}${q ? `?${q}` : ''}`;
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseHash(location.hash));
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}
