// The metrics text without tenant identifiers: series labelled by a tenant's model (its id or name) are summed
// over that label (counters) or reduced to their largest value (gauges), so an unauthenticated scrape of
// /metrics tells nobody which models exist or how busy each tenant is. Operators who need the per-model series
// configure HEARTH_METRICS_KEY and scrape with it.
import type { MetricValue, Registry } from 'prom-client';

/** Labels that name a tenant's resources. */
export const TENANT_LABELS: readonly string[] = ['model'];

function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function seriesLine(name: string, labels: Record<string, string | number>, value: number): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabelValue(String(v))}"`);
  return `${name}${parts.length ? `{${parts.join(',')}}` : ''} ${value}`;
}

/** Values of one metric with the tenant labels removed: series that then coincide are merged. */
export function withoutTenantLabels(
  values: readonly MetricValue<string>[],
  merge: 'sum' | 'max',
  tenantLabels: readonly string[] = TENANT_LABELS,
): { labels: Record<string, string | number>; value: number }[] {
  const merged = new Map<string, { labels: Record<string, string | number>; value: number }>();
  for (const v of values) {
    const labels = Object.fromEntries(Object.entries(v.labels).filter(([k, x]) => !tenantLabels.includes(k) && x !== undefined)) as Record<string, string | number>;
    const key = JSON.stringify(Object.entries(labels).sort());
    const seen = merged.get(key);
    if (!seen) merged.set(key, { labels, value: v.value });
    else seen.value = merge === 'sum' ? seen.value + v.value : Math.max(seen.value, v.value);
  }
  return [...merged.values()];
}

/** The registry's exposition text, with the series of tenant-labelled counters and gauges merged over those labels. */
export async function metricsWithoutTenants(registry: Registry, tenantLabels: readonly string[] = TENANT_LABELS): Promise<string> {
  const parts: string[] = [];
  for (const data of await registry.getMetricsAsJSON()) {
    const tenantLabelled = data.values.some((v) => tenantLabels.some((l) => v.labels[l] !== undefined));
    const type = String(data.type);
    if (!tenantLabelled) {
      parts.push(await registry.getSingleMetricAsString(data.name));
    } else if (type === 'counter' || type === 'gauge') {
      const lines = withoutTenantLabels(data.values, type === 'counter' ? 'sum' : 'max', tenantLabels).map((s) => seriesLine(data.name, s.labels, s.value));
      parts.push([`# HELP ${data.name} ${data.help}`, `# TYPE ${data.name} ${type}`, ...lines].join('\n'));
    }
    // Other tenant-labelled kinds (none today) are left out rather than shown with their labels.
  }
  return `${parts.join('\n\n')}\n`;
}
