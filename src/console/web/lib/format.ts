// Small display helpers (sizes, durations, dates, numbers).
export function formatBytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let v = n;
  let u = 0;
  while (v >= 1000 && u < units.length - 1) {
    v /= 1000;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(v < 10 ? 1 : 0)} ${units[u]}`;
}

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '—';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

/** Time between two ISO stamps (to now when `end` is null), or '—' when it has not started. */
export function elapsed(start: string | null, end: string | null, now = Date.now()): string {
  if (!start) return '—';
  return formatDuration((end ? Date.parse(end) : now) - Date.parse(start));
}

export function formatDate(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

/** A parameter count as people say it: 918,656 → "0.92M", 1.1e9 → "1.1B". */
export function formatParams(n: number | null | undefined): string {
  if (n === null || n === undefined) return '—';
  if (n >= 1e9) return `${(n / 1e9).toPrecision(2)}B`;
  if (n >= 1e5) return `${(n / 1e6).toPrecision(2)}M`;
  if (n >= 1e3) return `${(n / 1e3).toPrecision(2)}K`;
  return String(n);
}

export function formatNumber(v: unknown): string {
  if (typeof v !== 'number') return String(v);
  if (Number.isInteger(v)) return v.toLocaleString();
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e6) ? v.toExponential(3) : v.toPrecision(4);
}

/** A one-line preview of a JSON value, cut to `max` characters. */
export function preview(value: unknown, max = 80): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
