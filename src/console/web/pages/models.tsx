// Base models the server serves (with where each is loaded, a chat link and a fine-tune form), the entity's
// trained models, and one trained model's checkpoints (delete, copy the inference name, try it).
import type { Api } from '../lib/api';
import { useData } from '../lib/use-data';
import { href } from '../lib/route';
import { formatBytes, formatDate, formatNumber, formatParams } from '../lib/format';
import { CopyButton, Empty, ErrorBox, Loading, PageHeader } from '../components/ui';
import { FineTuneForm } from './fine-tune-form';
import { useState } from 'preact/hooks';

interface ModelSummary {
  id: string; project: string; name: string; base_model: string; created_at: string; inference_name: string; latest_step: number | null; active_jobs: number;
}
interface Checkpoint { id: string; step: number; created_at: string; metrics: Record<string, number>; size_bytes: number | null; inference_name: string }
interface ModelDetail extends ModelSummary { checkpoints: Checkpoint[] }
interface Place { worker_id: string; device: string; host: string }
interface BaseModel {
  id: string; format: string | null; quantization: string | null; parameters: number | null; size_bytes: number | null;
  context_length: number | null; architecture: string | null; loaded_on: Place[]; loading_on: Place[];
}

const FORMATS: Record<string, string> = { hf: 'Hugging Face', gguf: 'GGUF', generated: 'generated' };

function where(m: BaseModel): string {
  const at = (p: Place) => `${p.device} (${p.host})`;
  if (m.loaded_on.length) return m.loaded_on.map(at).join(', ');
  if (m.loading_on.length) return `loading on ${m.loading_on.map(at).join(', ')}`;
  return 'not loaded: loads at its first request';
}

function BaseModels({ api }: { api: Api }) {
  const system = useData(() => api.get<{ base_models: BaseModel[] }>('/v1/system'), []);
  const [fineTune, setFineTune] = useState<string | null>(null);
  const models = system.data?.base_models;
  return (
    <section aria-labelledby="base-models">
      <h2 id="base-models">Base models</h2>
      <ErrorBox error={system.error} />
      {system.loading && !models ? <Loading /> : null}
      {models && models.length === 0 ? <Empty>No base models. Import one with <code>hearth models import</code>.</Empty> : null}
      {models && models.length > 0 ? (
        <div class="table-wrap">
          <table class="base-models">
            <thead>
              <tr><th>Model</th><th>Format</th><th>Weights</th><th>Parameters</th><th>Size on disk</th><th>Context</th><th>Loaded on</th><th><span class="sr-only">Actions</span></th></tr>
            </thead>
            <tbody>
              {models.map((m) => (
                <tr key={m.id} data-model={m.id}>
                  <td><code>{m.id}</code>{m.architecture ? <span class="muted small-text"> {m.architecture}</span> : null}</td>
                  <td>{m.format ? FORMATS[m.format] ?? m.format : '—'}</td>
                  <td>{m.quantization ?? '—'}</td>
                  <td>{formatParams(m.parameters)}</td>
                  <td>{formatBytes(m.size_bytes)}</td>
                  <td>{m.context_length === null ? '—' : formatNumber(m.context_length)}</td>
                  <td class="loaded-on">{where(m)}</td>
                  <td class="nowrap">
                    <a class="button small" href={href(['playground'], { model: m.id })}>Chat</a>{' '}
                    <button type="button" class="small" aria-expanded={fineTune === m.id} onClick={() => setFineTune(fineTune === m.id ? null : m.id)}>Fine-tune</button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      {fineTune ? <FineTuneForm key={fineTune} api={api} baseModel={fineTune} onClose={() => setFineTune(null)} /> : null}
    </section>
  );
}

export function ModelsPage({ api }: { api: Api }) {
  const models = useData(() => api.get<{ data: ModelSummary[] }>('/v1/preview/models'), []);
  return (
    <>
      <PageHeader title="Models" />
      <BaseModels api={api} />
      <h2>Trained models</h2>
      <ErrorBox error={models.error} />
      {models.loading && !models.data ? <Loading /> : null}
      {models.data && models.data.data.length === 0 ? (
        <Empty>No trained models yet. Fine-tune a base model above, or create one with <code>POST /v1/preview/models</code> (ART's <code>TrainableModel.register</code>).</Empty>
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
