// Training jobs of the entity, newest first, refreshed while any is queued or running.
import { useEffect, useState } from 'preact/hooks';
import type { Api } from '../lib/api';
import { href } from '../lib/route';
import { elapsed, formatDate } from '../lib/format';
import { Empty, ErrorBox, Loading, PageHeader, Status } from '../components/ui';

export interface JobItem {
  id: string; kind: 'rl' | 'sft'; status: string; model_id: string; model_name: string; project: string;
  created_at: string; started_at: string | null; finished_at: string | null; error_message: string | null;
}
interface JobPage { data: JobItem[]; has_more: boolean; last_id: string | null }

const ACTIVE = new Set(['queued', 'running']);

export function JobsPage({ api, modelId }: { api: Api; modelId: string | null }) {
  const [jobs, setJobs] = useState<JobItem[] | null>(null);
  const [more, setMore] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const base = `/v1/preview/training-jobs?limit=50${modelId ? `&model_id=${encodeURIComponent(modelId)}` : ''}`;

  // The first page, again every 3 s while a job on it is active; older pages are added by "Load more".
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    const load = async () => {
      try {
        const page = await api.get<JobPage>(base);
        if (stopped) return;
        setJobs((prev) => {
          const older = prev ? prev.slice(page.data.length).filter((j) => !page.data.some((p) => p.id === j.id)) : [];
          return [...page.data, ...older];
        });
        setMore((m) => m ?? (page.has_more ? page.last_id : null));
        setError(null);
        if (page.data.some((j) => ACTIVE.has(j.status))) timer = setTimeout(load, 3000);
      } catch (e) {
        if (!stopped) setError((e as Error).message);
      }
    };
    setJobs(null);
    setMore(null);
    void load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [api, base]);

  const loadMore = async () => {
    if (!more) return;
    try {
      const page = await api.get<JobPage>(`${base}&after=${encodeURIComponent(more)}`);
      setJobs((prev) => [...(prev ?? []), ...page.data]);
      setMore(page.has_more ? page.last_id : null);
    } catch (e) {
      setError((e as Error).message);
    }
  };

  return (
    <>
      <PageHeader title={modelId ? 'Training jobs of one model' : 'Training jobs'}>
        {modelId ? <a class="button" href={href(['jobs'])}>All jobs</a> : null}
      </PageHeader>
      <ErrorBox error={error} />
      {jobs === null && !error ? <Loading /> : null}
      {jobs && jobs.length === 0 ? <Empty>No training jobs yet. ART's <code>model.train()</code> or <code>POST /v1/preview/sft-training-jobs</code> starts one.</Empty> : null}
      {jobs && jobs.length > 0 ? (
        <div class="table-wrap">
          <table>
            <thead>
              <tr><th>Job</th><th>Status</th><th>Kind</th><th>Model</th><th>Created</th><th>Duration</th></tr>
            </thead>
            <tbody>
              {jobs.map((j) => (
                <tr key={j.id}>
                  <td><a href={href(['jobs', j.id])} class="mono">{j.id.slice(0, 8)}</a></td>
                  <td><Status status={j.status} /></td>
                  <td>{j.kind.toUpperCase()}</td>
                  <td><a href={href(['models', j.model_id])}>{j.project} / {j.model_name}</a></td>
                  <td>{formatDate(j.created_at)}</td>
                  <td>{elapsed(j.started_at, j.finished_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      {more ? <button type="button" onClick={loadMore}>Load more</button> : null}
    </>
  );
}
