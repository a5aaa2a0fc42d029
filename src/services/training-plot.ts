// A picture of a training job for people who would rather look than read: loss, reward and learning rate
// per gradient step, as an SVG (pure) that the route rasterizes to PNG with sharp.

export interface PlotSeries {
  name: string;
  color: string;
  points: [number, number][];
}

const W = 900;
const PANEL_H = 180;
const PAD = { left: 70, right: 20, top: 28, bottom: 28 };

const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

/** Short, readable tick labels (1.2e-5, 0.034, 12.5). */
export function formatTick(v: number): string {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-3) return v.toExponential(1);
  return String(Number(v.toPrecision(3)));
}

/** Series of one numeric key of the gradient_step events, by step number (1-based). */
export function seriesFromEvents(events: { type: string; data: Record<string, unknown> }[], key: string): [number, number][] {
  const steps = events.filter((e) => e.type === 'gradient_step');
  return steps.flatMap((e, i) => (typeof e.data[key] === 'number' && Number.isFinite(e.data[key]) ? [[i + 1, e.data[key] as number] as [number, number]] : []));
}

function panel(series: PlotSeries, index: number, maxStep: number): string {
  const top = index * (PANEL_H + PAD.top + PAD.bottom) + PAD.top;
  const plotW = W - PAD.left - PAD.right;
  const ys = series.points.map((p) => p[1]);
  let lo = ys.length ? ys.reduce((a, y) => Math.min(a, y)) : 0;
  let hi = ys.length ? ys.reduce((a, y) => Math.max(a, y)) : 1;
  if (lo === hi) [lo, hi] = [lo - (Math.abs(lo) || 1) * 0.1, hi + (Math.abs(hi) || 1) * 0.1];
  const x = (step: number) => PAD.left + (maxStep <= 1 ? plotW / 2 : ((step - 1) / (maxStep - 1)) * plotW);
  const y = (v: number) => top + PANEL_H - ((v - lo) / (hi - lo)) * PANEL_H;
  const parts = [
    `<text x="${PAD.left}" y="${top - 8}" font-size="14" font-family="sans-serif" fill="#222">${esc(series.name)}</text>`,
    `<rect x="${PAD.left}" y="${top}" width="${plotW}" height="${PANEL_H}" fill="#fafafa" stroke="#ccc"/>`,
  ];
  for (const t of [lo, (lo + hi) / 2, hi]) {
    parts.push(`<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${y(t)}" y2="${y(t)}" stroke="#e4e4e4"/>`);
    parts.push(`<text x="${PAD.left - 6}" y="${y(t) + 4}" font-size="11" font-family="sans-serif" text-anchor="end" fill="#555">${formatTick(t)}</text>`);
  }
  if (series.points.length === 0) {
    parts.push(`<text x="${PAD.left + plotW / 2}" y="${top + PANEL_H / 2}" font-size="12" font-family="sans-serif" text-anchor="middle" fill="#999">no data</text>`);
  } else {
    const d = series.points.map(([s, v], i) => `${i ? 'L' : 'M'}${x(s).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    parts.push(`<path d="${d}" fill="none" stroke="${series.color}" stroke-width="2"/>`);
    for (const [s, v] of series.points) parts.push(`<circle cx="${x(s).toFixed(1)}" cy="${y(v).toFixed(1)}" r="2.5" fill="${series.color}"/>`);
  }
  parts.push(`<text x="${W - PAD.right}" y="${top + PANEL_H + 16}" font-size="11" font-family="sans-serif" text-anchor="end" fill="#555">step ${maxStep}</text>`);
  return parts.join('');
}

export function trainingPlotSvg(title: string, series: PlotSeries[]): string {
  const maxStep = Math.max(1, ...series.flatMap((s) => s.points.map((p) => p[0])));
  const height = series.length * (PANEL_H + PAD.top + PAD.bottom) + 20;
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}">` +
    `<rect width="100%" height="100%" fill="#fff"/>` +
    `<text x="${W / 2}" y="${height - 6}" font-size="12" font-family="sans-serif" text-anchor="middle" fill="#444">${esc(title)}</text>` +
    series.map((s, i) => panel(s, i, maxStep)).join('') +
    `</svg>`
  );
}

export function jobPlotSeries(events: { type: string; data: Record<string, unknown> }[]): PlotSeries[] {
  return [
    { name: 'loss', color: '#d62728', points: seriesFromEvents(events, 'loss') },
    { name: 'reward', color: '#2ca02c', points: seriesFromEvents(events, 'reward') },
    { name: 'learning rate', color: '#1f77b4', points: seriesFromEvents(events, 'learning_rate') },
  ];
}
