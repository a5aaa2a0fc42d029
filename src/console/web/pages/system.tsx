// System: workers and their devices, queue depths, installed base models with hardware options and
// prices, and token usage per project.
import type { Api } from '../lib/api';
import { formatBytes, formatNumber } from '../lib/format';
import { useData } from '../lib/use-data';
import { Empty, ErrorBox, Loading, PageHeader } from '../components/ui';

interface Device { host?: string; cpu?: { model: string; cores: number; memoryMiB: number; simd: string[] }; gpus?: { vendor: string; index: number; name: string; memoryMiB: number }[] }
interface SystemInfo {
  entity: string;
  workers: { id: string; kind: string; device: string; host: string; pid: number; load: number; tasks: number; last_seen_ms_ago: number; devices: Device | null; loading: string[] }[];
  queues: { inference_in_flight: number; training_queued: number; training_running: number };
  base_models: { id: string; parameters: number | null; size_bytes: number | null; format: string | null }[];
  your_jobs: Record<string, number>;
}
interface Hardware { hardware: { id: string; name: string; type: string; pricing: { cents_per_million_input_tokens: number; cents_per_million_output_tokens: number } }[] }
interface Usage { data: { project: string; model: string; requests: number; prompt_tokens: number; completion_tokens: number; total_tokens: number }[] }

function deviceText(d: Device | null): string {
  if (!d) return '—';
  const gpus = (d.gpus ?? []).map((g) => `${g.name} (${Math.round(g.memoryMiB / 1024)} GiB)`);
  const cpu = d.cpu ? `${d.cpu.model}, ${d.cpu.cores} threads, ${Math.round(d.cpu.memoryMiB / 1024)} GiB` : '';
  return [...gpus, cpu].filter(Boolean).join(' · ');
}

function HardwareOptions({ api, model }: { api: Api; model: string }) {
  const name = model.slice(model.indexOf('/') + 1);
  const hw = useData(() => api.get<Hardware>(`/inference/cpu/v2/hardware?model=${encodeURIComponent(name)}`).then(async (cpu) => {
    const gpu = await Promise.all(['nvidia', 'amd'].map((v) => api.get<Hardware>(`/inference/${v}/v2/hardware?model=${encodeURIComponent(name)}`).catch(() => ({ hardware: [] }))));
    return [...cpu.hardware, ...gpu.flatMap((g) => g.hardware)];
  }), [model]);
  if (hw.error) return <span class="error-text">{hw.error}</span>;
  if (!hw.data) return <span class="muted">…</span>;
  if (hw.data.length === 0) return <span class="muted">none fits</span>;
  return (
    <ul class="plain">
      {hw.data.map((h) => (
        <li key={h.id}>
          {h.name} <span class="muted">({h.type})</span>: {formatNumber(h.pricing.cents_per_million_input_tokens)}¢ in / {formatNumber(h.pricing.cents_per_million_output_tokens)}¢ out per M tokens
        </li>
      ))}
    </ul>
  );
}

export function SystemPage({ api }: { api: Api }) {
  const sys = useData(() => api.get<SystemInfo>('/v1/system'), [], 5000);
  const usage = useData(() => api.get<Usage>('/v1/usage'), []);
  const s = sys.data;
  return (
    <>
      <PageHeader title="System" />
      <ErrorBox error={sys.error} />
      {!s && sys.loading ? <Loading /> : null}
      {s ? (
        <>
          <dl class="facts">
            <div><dt>Inference in flight</dt><dd>{s.queues.inference_in_flight}</dd></div>
            <div><dt>Training queued</dt><dd>{s.queues.training_queued}</dd></div>
            <div><dt>Training running</dt><dd>{s.queues.training_running}</dd></div>
            <div><dt>Your jobs</dt><dd>{Object.entries(s.your_jobs).filter(([, n]) => n > 0).map(([k, n]) => `${n} ${k}`).join(', ') || 'none'}</dd></div>
          </dl>
          <h2>Workers</h2>
          {s.workers.length === 0 ? <Empty>No worker has sent a heartbeat recently.</Empty> : (
            <div class="table-wrap">
              <table>
                <thead><tr><th>Kind</th><th>Device</th><th>Host</th><th>Load</th><th>Tasks</th><th>Seen</th><th>Hardware</th></tr></thead>
                <tbody>
                  {s.workers.map((w) => (
                    <tr key={w.id}>
                      <td>{w.kind}</td><td>{w.device}</td><td>{w.host} <span class="muted">pid {w.pid}</span></td><td>{w.load}</td><td>{w.tasks}</td>
                      <td>{(w.last_seen_ms_ago / 1000).toFixed(1)}s ago{w.loading.length ? <span class="muted"> (loading {w.loading.join(', ')})</span> : null}</td><td class="wrap">{deviceText(w.devices)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          <h2>Base models and hardware prices</h2>
          <div class="table-wrap">
            <table>
              <thead><tr><th>Model</th><th>Parameters</th><th>Size</th><th>Format</th><th>Hardware options (price per million tokens)</th></tr></thead>
              <tbody>
                {s.base_models.map((m) => (
                  <tr key={m.id}>
                    <td>{m.id}</td><td>{m.parameters === null ? '—' : formatNumber(m.parameters)}</td><td>{formatBytes(m.size_bytes)}</td><td>{m.format ?? '—'}</td>
                    <td class="wrap"><HardwareOptions api={api} model={m.id} /></td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      ) : null}
      <h2>Usage</h2>
      <ErrorBox error={usage.error} />
      {usage.data && usage.data.data.length === 0 ? <Empty>No inference requests yet.</Empty> : null}
      {usage.data && usage.data.data.length > 0 ? (
        <div class="table-wrap">
          <table>
            <thead><tr><th>Project</th><th>Model</th><th>Requests</th><th>Prompt tokens</th><th>Completion tokens</th><th>Total</th></tr></thead>
            <tbody>
              {usage.data.data.map((u) => (
                <tr key={`${u.project}:${u.model}`}>
                  <td>{u.project}</td><td class="wrap">{u.model}</td><td>{u.requests.toLocaleString()}</td><td>{u.prompt_tokens.toLocaleString()}</td>
                  <td>{u.completion_tokens.toLocaleString()}</td><td>{u.total_tokens.toLocaleString()}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </>
  );
}
