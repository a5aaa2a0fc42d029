// "Fine-tune" on a base model: an SFT job from an uploaded JSONL file (ART's train.jsonl: one {messages} per
// line) or a table of the entity, through the same calls a script makes: upload the data
// (POST /v1/preview/datasets) unless it is a table, create the trained model (POST /v1/preview/models),
// start the job (POST /v1/preview/sft-training-jobs), then open the job's page.
import { useEffect, useState } from 'preact/hooks';
import type { Api } from '../lib/api';
import { href } from '../lib/route';
import { defaultTrainedName, sftConfigFrom } from '../lib/fine-tune';
import { ErrorBox } from '../components/ui';

interface TableEntry { project_id: string; digest: string; row_count: number }

export function FineTuneForm({ api, baseModel, onClose }: { api: Api; baseModel: string; onClose: () => void }) {
  const [project, setProject] = useState('console');
  const [name, setName] = useState(() => defaultTrainedName(baseModel));
  const [source, setSource] = useState<'file' | 'table'>('file');
  const [file, setFile] = useState<File | null>(null);
  const [tables, setTables] = useState<TableEntry[] | null>(null);
  const [table, setTable] = useState('');
  const [learningRate, setLearningRate] = useState('1e-4');
  const [batchSize, setBatchSize] = useState('auto');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    if (source !== 'table' || tables) return;
    api.post<{ tables: TableEntry[] }>('/table/list', { limit: 100 }).then((r) => {
      setTables(r.tables);
      if (r.tables[0]) setTable(`weave:///${r.tables[0].project_id}/table/${r.tables[0].digest}`);
    }, (e: Error) => setError(e.message));
  }, [source]);

  const submit = async (e: Event) => {
    e.preventDefault();
    const config = sftConfigFrom({ learningRate, batchSize });
    if ('error' in config) return setError(config.error);
    if (source === 'file' && !file) return setError('Choose a JSONL file.');
    if (source === 'table' && !table) return setError('Choose a table.');
    setBusy(true);
    setError(null);
    try {
      let dataUrl = table;
      if (source === 'file') {
        const uploaded = await api.upload<{ url: string }>(
          `/v1/preview/datasets?project=${encodeURIComponent(project)}&name=${encodeURIComponent(`${name}-data`)}`, await file!.text(), 'application/x-ndjson',
        );
        dataUrl = uploaded.url;
      }
      const model = await api.post<{ id: string }>('/v1/preview/models', { project, name, base_model: baseModel });
      const job = await api.post<{ id: string }>('/v1/preview/sft-training-jobs', { model_id: model.id, training_data_url: dataUrl, config });
      location.hash = href(['jobs', job.id]);
    } catch (err) {
      setError((err as Error).message);
      setBusy(false);
    }
  };

  return (
    <form class="fine-tune" onSubmit={submit} aria-label={`Fine-tune ${baseModel}`}>
      <h3>Fine-tune {baseModel} (SFT, LoRA)</h3>
      <div class="controls">
        <label>Project<input value={project} onInput={(e) => setProject(e.currentTarget.value)} required /></label>
        <label class="grow">New model name<input value={name} onInput={(e) => setName(e.currentTarget.value)} required /></label>
      </div>
      <div class="controls" role="radiogroup" aria-label="Training data">
        <label class="inline"><input type="radio" name="source" checked={source === 'file'} onChange={() => setSource('file')} /> Upload a JSONL file</label>
        <label class="inline"><input type="radio" name="source" checked={source === 'table'} onChange={() => setSource('table')} /> A table</label>
      </div>
      <div class="controls">
        {source === 'file' ? (
          <label class="grow">
            Rows <code>{'{"messages": [{"role": "user", …}, {"role": "assistant", …}]}'}</code>, one a line
            <input type="file" accept=".jsonl,.ndjson,.json,application/x-ndjson" onChange={(e) => setFile(e.currentTarget.files?.[0] ?? null)} />
          </label>
        ) : (
          <label class="grow">
            Table (rows with <code>messages</code>)
            <select value={table} onChange={(e) => setTable(e.currentTarget.value)}>
              {(tables ?? []).map((t) => {
                const url = `weave:///${t.project_id}/table/${t.digest}`;
                return <option key={url} value={url}>{t.project_id} · {t.digest.slice(0, 12)} · {t.row_count} rows</option>;
              })}
            </select>
            {tables && tables.length === 0 ? <span class="muted small-text">No tables yet.</span> : null}
          </label>
        )}
        <label>Learning rate<input value={learningRate} onInput={(e) => setLearningRate(e.currentTarget.value)} inputMode="decimal" /></label>
        <label>Batch size<input value={batchSize} onInput={(e) => setBatchSize(e.currentTarget.value)} /></label>
      </div>
      <ErrorBox error={error} />
      <div class="controls">
        <button type="submit" class="primary" disabled={busy}>{busy ? 'Starting…' : 'Start fine-tuning'}</button>
        <button type="button" onClick={onClose} disabled={busy}>Close</button>
      </div>
    </form>
  );
}
