// Trained models of the entity, and one model's checkpoints (delete, copy the inference name, try it).
import type { Api } from '../lib/api';
import { useData } from '../lib/use-data';
import { href } from '../lib/route';
import { formatBytes, formatDate, formatNumber } from '../lib/format';
import { CopyButton, Empty, ErrorBox, Loading, PageHeader } from '../components/ui';
import { useState } from 'preact/hooks';

interface ModelSummary {
  id: string; project: string; name: string; base_model: string; created_at: string; inference_name: string; latest_step: number | null; active_jobs: number;
}
interface Checkpoint { id: string; step: number; created_at: string; metrics: Record<string, number>; size_bytes: number | null; inference_name: string }
interface ModelDetail extends ModelSummary { checkpoints: Checkpoint[] }

export function ModelsPage({ api }: { api: Api }) {
  const models = useData(() => api.get<{ data: ModelSummary[] }>('/v1/preview/models'), []);
  return (
    <>
      <PageHeader title="Models" />
      <ErrorBox error={models.error} />
      {models.loading && !models.data ? <Loading /> : null}
      {models.data && models.data.data.length === 0 ? (
        <Empty>No trained models yet. Create one with <code>POST /v1/preview/models</code> (ART's <code>TrainableModel.register</code>).</Empty>
      ) : null}
      {models.data && models.data.data.length > 0 ? (
        <div class="table-wrap">
          <table>
            <thead>
              <tr><th>Project</th><th>Model</th><th>Base model</th><th>Latest step</th><th>Active jobs</th><th>Created</th></tr>
            </thead>
            <tbody>
              {models.data.data.map((m) => (
                <tr key={m.id}>
                  <td>{m.project}</td>
                  <td><a href={href(['models', m.id])}>{m.name}</a></td>
                  <td>{m.base_model}</td>
                  <td>{m.latest_step ?? '—'}</td>
                  <td>{m.active_jobs}</td>
                  <td>{formatDate(m.created_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </>
  );
}

export function ModelPage({ api, id }: { api: Api; id: string }) {
  const model = useData(() => api.get<ModelDetail>(`/v1/preview/models/${encodeURIComponent(id)}`), [id]);
  const [actionError, setActionError] = useState<string | null>(null);
  const remove = async (step: number) => {
    if (!confirm(`Delete checkpoint step ${step}? Its weights are removed from disk.`)) return;
    try {
      await api.del(`/v1/preview/models/${encodeURIComponent(id)}/checkpoints`, { steps: [step] });
      model.reload();
    } catch (e) {
      setActionError((e as Error).message);
    }
  };
  const m = model.data;
  return (
    <>
      <PageHeader title={m ? `${m.project} / ${m.name}` : 'Model'}>
        {m ? <a class="button" href={href(['jobs'], { model: m.id })}>Training jobs</a> : null}
        {m ? <a class="button" href={href(['playground'], { model: m.inference_name })}>Try in playground</a> : null}
      </PageHeader>
      <ErrorBox error={model.error ?? actionError} />
      {!m && model.loading ? <Loading /> : null}
      {m ? (
        <>
          <dl class="facts">
            <div><dt>Base model</dt><dd>{m.base_model}</dd></div>
            <div><dt>Created</dt><dd>{formatDate(m.created_at)}</dd></div>
            <div><dt>Latest step</dt><dd>{m.latest_step ?? '— (serves the base weights)'}</dd></div>
            <div class="wide"><dt>Inference name</dt><dd><code>{m.inference_name}</code> <CopyButton text={m.inference_name} /></dd></div>
          </dl>
          <h2>Checkpoints</h2>
          {m.checkpoints.length === 0 ? <Empty>No checkpoints yet: they appear as training jobs finish steps.</Empty> : (
            <div class="table-wrap">
              <table>
                <thead>
                  <tr><th>Step</th><th>Created</th><th>Size</th><th>Metrics</th><th>Inference name</th><th><span class="sr-only">Actions</span></th></tr>
                </thead>
                <tbody>
                  {[...m.checkpoints].reverse().map((c) => (
                    <tr key={c.id}>
                      <td>{c.step}</td>
                      <td>{formatDate(c.created_at)}</td>
                      <td>{formatBytes(c.size_bytes)}</td>
                      <td class="metrics">{Object.keys(c.metrics).length === 0 ? '—' : Object.entries(c.metrics).slice(0, 4).map(([k, v]) => <span key={k}>{k} {formatNumber(v)}</span>)}</td>
                      <td class="nowrap"><code>{c.inference_name}</code> <CopyButton text={c.inference_name} /></td>
                      <td class="nowrap">
                        <a class="button small" href={href(['playground'], { model: c.inference_name })}>Chat</a>{' '}
                        <button type="button" class="small danger" onClick={() => remove(c.step)}>Delete</button>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </>
      ) : null}
    </>
  );
}
