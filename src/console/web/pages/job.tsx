// One training job: status and timing, live metric curves from its events (polled with an `after`
// cursor, so each poll fetches only new events), the event log, the request it was created with, cancel.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Api } from '../lib/api';
import { href } from '../lib/route';
import { appendEvents, emptySeries, metricOrder, type TrainingEvent } from '../lib/series';
import { elapsed, formatDate, preview } from '../lib/format';
import { useData } from '../lib/use-data';
import { MetricChart } from '../components/chart';
import { ErrorBox, Json, Loading, PageHeader, Status } from '../components/ui';

interface JobDetail {
  id: string; status: string; kind: string; model_id: string; created_at: string; started_at: string | null; finished_at: string | null; error_message: string | null;
}
interface EventPage { data: TrainingEvent[]; has_more: boolean; last_id: string }

const TERMINAL_EVENTS = new Set(['training_ended', 'training_failed']);
const COLORS = ['#e8590c', '#1c7ed6', '#2f9e44', '#ae3ec9', '#f08c00', '#0c8599', '#c2255c', '#5f3dc4'];

/** All events of the job so far and their series; polls once a second until a terminal event arrives. */
function useLiveEvents(api: Api, jobId: string) {
  const [events, setEvents] = useState<TrainingEvent[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [finished, setFinished] = useState(false);
  const series = useRef(emptySeries());

  useEffect(() => {
    series.current = emptySeries();
    setEvents([]);
    setFinished(false);
    let after = '';
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      let ended = false;
      try {
        for (;;) {
          const page = await api.get<EventPage>(`/v1/preview/training-jobs/${encodeURIComponent(jobId)}/events?limit=100${after ? `&after=${after}` : ''}`);
          if (stopped) return;
          if (page.data.length) {
            after = page.last_id;
            appendEvents(series.current, page.data);
            setEvents((prev) => [...prev, ...page.data]);
            if (page.data.some((e) => TERMINAL_EVENTS.has(e.type))) ended = true;
          }
          if (!page.has_more) break;
        }
        setError(null);
      } catch (e) {
        setError((e as Error).message);
      }
      if (ended) setFinished(true);
      else if (!stopped) timer = setTimeout(poll, 1000);
    };
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [api, jobId]);
  return { events, series: series.current, error, finished };
}

export function JobPage({ api, id }: { api: Api; id: string }) {
  const live = useLiveEvents(api, id);
  const job = useData(() => api.get<JobDetail>(`/v1/preview/training-jobs/${encodeURIComponent(id)}`), [id, live.finished], live.finished ? null : 2000);
  const config = useData(() => api.get<{ request: unknown; trajectory_groups: number | null }>(`/v1/preview/training-jobs/${encodeURIComponent(id)}/config`), [id]);
  const [cancelError, setCancelError] = useState<string | null>(null);
  const [showAll, setShowAll] = useState(false);
  const j = job.data;
  const active = j && (j.status === 'queued' || j.status === 'running');

  const cancel = async () => {
    if (!confirm('Cancel this training job?')) return;
    try {
      await api.post(`/v1/preview/training-jobs/${encodeURIComponent(id)}/cancel`, {});
      job.reload();
    } catch (e) {
      setCancelError((e as Error).message);
    }
  };

  const names = metricOrder(live.series.metrics.keys());
  const shown = showAll ? live.events : live.events.slice(-100);
  return (
    <>
      <PageHeader title={<>Job <span class="mono">{id.slice(0, 8)}</span> {j ? <Status status={j.status} /> : null}</>}>
        {j ? <a class="button" href={href(['models', j.model_id])}>Model</a> : null}
        {active ? <button type="button" class="danger" onClick={cancel}>Cancel job</button> : null}
      </PageHeader>
      <ErrorBox error={job.error ?? live.error ?? cancelError} />
      {!j && job.loading ? <Loading /> : null}
      {j ? (
        <dl class="facts">
          <div><dt>Kind</dt><dd>{j.kind.toUpperCase()}</dd></div>
          <div><dt>Created</dt><dd>{formatDate(j.created_at)}</dd></div>
          <div><dt>Started</dt><dd>{formatDate(j.started_at)}</dd></div>
          <div><dt>Finished</dt><dd>{formatDate(j.finished_at)}</dd></div>
          <div><dt>Duration</dt><dd>{elapsed(j.started_at, j.finished_at)}</dd></div>
          <div><dt>Gradient steps</dt><dd id="step-count">{live.series.steps.length}</dd></div>
          {j.error_message ? <div class="wide"><dt>Error</dt><dd class="error-text">{j.error_message}</dd></div> : null}
        </dl>
      ) : null}

      <h2>Curves</h2>
      {names.length === 0 ? <p class="muted">{active ? 'Waiting for the first gradient step…' : 'This job reported no gradient steps.'}</p> : null}
      <div class="charts">
        {names.map((name, i) => (
          <MetricChart key={name} title={name} xs={[...live.series.steps]} ys={[...live.series.metrics.get(name)!]} color={COLORS[i % COLORS.length]} />
        ))}
      </div>

      <h2>Events <span class="muted">({live.events.length})</span></h2>
      <div class="table-wrap event-log">
        <table>
          <thead><tr><th>#</th><th>Type</th><th>Data</th></tr></thead>
          <tbody>
            {shown.map((e, i) => (
              <tr key={e.id}>
                <td>{live.events.length - shown.length + i + 1}</td>
                <td><span class={`event event-${e.type}`}>{e.type}</span></td>
                <td class="mono wrap" title={JSON.stringify(e.data)}>{preview(e.data, 160)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {!showAll && live.events.length > shown.length ? <button type="button" onClick={() => setShowAll(true)}>Show all {live.events.length} events</button> : null}

      <h2>Config</h2>
      <ErrorBox error={config.error} />
      {config.data ? (
        <>
          {config.data.trajectory_groups !== null ? <p class="muted">{config.data.trajectory_groups} trajectory groups (not shown)</p> : null}
          <Json value={config.data.request} />
        </>
      ) : null}
    </>
  );
}
