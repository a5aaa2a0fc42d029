// Tables: the entity's projects and table versions (POST /table/list), and one table paged through
// /table/query (limit/offset, sort_by, row-digest filter) with a row's JSON beside it.
import { useEffect, useState } from 'preact/hooks';
import type { Api } from '../lib/api';
import { href } from '../lib/route';
import { formatDate, preview } from '../lib/format';
import { useData } from '../lib/use-data';
import { Empty, ErrorBox, Json, Loading, PageHeader } from '../components/ui';

interface TableList {
  tables: { project_id: string; digest: string; row_count: number; created_at: string }[];
  projects: { project: string; tables: number }[];
  next_cursor: number | null;
}
interface Row { digest: string; val: unknown; original_index: number }

export function TablesPage({ api, entity, project }: { api: Api; entity: string; project: string | null }) {
  const [extra, setExtra] = useState<TableList['tables']>([]);
  const [cursor, setCursor] = useState<number | null>(null);
  const list = useData(async () => {
    const r = await api.post<TableList>('/table/list', project ? { project_id: `${entity}/${project}`, limit: 50 } : { limit: 50 });
    setExtra([]);
    setCursor(r.next_cursor);
    return r;
  }, [project]);
  const loadMore = async () => {
    if (cursor === null) return;
    const r = await api.post<TableList>('/table/list', { ...(project ? { project_id: `${entity}/${project}` } : {}), limit: 50, after: cursor });
    setExtra((e) => [...e, ...r.tables]);
    setCursor(r.next_cursor);
  };
  const tables = [...(list.data?.tables ?? []), ...extra];
  return (
    <>
      <PageHeader title="Tables" />
      <ErrorBox error={list.error} />
      {list.data ? (
        <nav class="chips" aria-label="Projects">
          <a href={href(['tables'])} class={project ? 'chip' : 'chip active'} aria-current={project ? undefined : 'page'}>All projects</a>
          {list.data.projects.map((p) => (
            <a key={p.project} href={href(['tables', p.project])} class={p.project === project ? 'chip active' : 'chip'} aria-current={p.project === project ? 'page' : undefined}>
              {p.project} <span class="muted">{p.tables}</span>
            </a>
          ))}
        </nav>
      ) : null}
      {list.loading && !list.data ? <Loading /> : null}
      {list.data && tables.length === 0 ? <Empty>No tables yet. Weave's client (or <code>POST /table/create</code>) writes them.</Empty> : null}
      {tables.length > 0 ? (
        <div class="table-wrap">
          <table>
            <thead><tr><th>Project</th><th>Digest</th><th>Rows</th><th>Created</th></tr></thead>
            <tbody>
              {tables.map((t) => {
                const p = t.project_id.slice(t.project_id.indexOf('/') + 1);
                return (
                  <tr key={`${t.project_id}:${t.digest}`}>
                    <td>{p}</td>
                    <td><a class="mono" href={href(['tables', p, t.digest])}>{t.digest.slice(0, 16)}…</a></td>
                    <td>{t.row_count.toLocaleString()}</td>
                    <td>{formatDate(t.created_at)}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      ) : null}
      {cursor !== null ? <button type="button" onClick={loadMore}>Load more</button> : null}
    </>
  );
}

/** Top-level keys of the rows' values, in first-seen order (at most `max`). */
function columnsOf(rows: Row[], max = 8): string[] {
  const seen: string[] = [];
  for (const r of rows) {
    if (r.val && typeof r.val === 'object' && !Array.isArray(r.val)) for (const k of Object.keys(r.val)) if (!seen.includes(k) && seen.length < max) seen.push(k);
  }
  return seen;
}

const PAGE_SIZES = [25, 50, 100, 250];

export function TablePage({ api, entity, project, digest }: { api: Api; entity: string; project: string; digest: string }) {
  const projectId = `${entity}/${project}`;
  const [pageSize, setPageSize] = useState(50);
  const [page, setPage] = useState(0);
  const [sortField, setSortField] = useState('');
  const [sortDir, setSortDir] = useState<'asc' | 'desc'>('asc');
  const [filter, setFilter] = useState('');
  const [applied, setApplied] = useState({ sortField: '', sortDir: 'asc' as 'asc' | 'desc', filter: '' });
  const [selected, setSelected] = useState<Row | null>(null);
  const count = useData(() => api.post<{ count: number }>('/table/query_stats', { project_id: projectId, digest }), [projectId, digest]);
  const digests = applied.filter.split(/[\s,]+/).filter(Boolean);
  const rows = useData(
    () =>
      api.post<{ rows: Row[] }>('/table/query', {
        project_id: projectId, digest, limit: pageSize, offset: page * pageSize,
        ...(applied.sortField ? { sort_by: [{ field: applied.sortField, direction: applied.sortDir }] } : {}),
        ...(digests.length ? { filter: { row_digests: digests } } : {}),
      }),
    [projectId, digest, page, pageSize, applied],
  );
  useEffect(() => setSelected(null), [page, applied, pageSize]);
  const total = digests.length ? null : count.data?.count ?? null;
  const pages = total === null ? null : Math.max(1, Math.ceil(total / pageSize));
  const data = rows.data?.rows ?? [];
  const columns = columnsOf(data);
  const lastPage = pages !== null ? page >= pages - 1 : data.length < pageSize;

  const apply = (e: Event) => {
    e.preventDefault();
    setPage(0);
    setApplied({ sortField: sortField.trim(), sortDir, filter });
  };

  return (
    <>
      <PageHeader title={<>Table <span class="mono">{digest.slice(0, 12)}…</span></>}>
        <a class="button" href={href(['tables', project])}>All tables of {project}</a>
      </PageHeader>
      <p class="muted">{projectId} · {total === null ? '…' : `${total.toLocaleString()} rows`}</p>
      <form class="controls" onSubmit={apply}>
        <label class="grow">Sort by field <input value={sortField} placeholder="e.g. score or meta.step" onInput={(e) => setSortField(e.currentTarget.value)} /></label>
        <label>Direction
          <select value={sortDir} onChange={(e) => setSortDir(e.currentTarget.value as 'asc' | 'desc')}>
            <option value="asc">ascending</option><option value="desc">descending</option>
          </select>
        </label>
        <label class="grow">Row digests <input value={filter} placeholder="filter: digests, comma separated" onInput={(e) => setFilter(e.currentTarget.value)} /></label>
        <button type="submit">Apply</button>
      </form>
      <ErrorBox error={rows.error ?? count.error} />
      <div class="pager" role="navigation" aria-label="Pages">
        <button type="button" onClick={() => setPage(0)} disabled={page === 0}>First</button>
        <button type="button" onClick={() => setPage((p) => Math.max(0, p - 1))} disabled={page === 0} aria-label="Previous page">‹ Prev</button>
        <span id="page-label">Page {page + 1}{pages !== null ? ` of ${pages.toLocaleString()}` : ''}</span>
        <button type="button" onClick={() => setPage((p) => p + 1)} disabled={lastPage} aria-label="Next page">Next ›</button>
        {pages !== null ? <button type="button" onClick={() => setPage(pages - 1)} disabled={lastPage}>Last</button> : null}
        <label class="inline">Rows per page
          <select value={pageSize} onChange={(e) => { setPageSize(Number(e.currentTarget.value)); setPage(0); }}>
            {PAGE_SIZES.map((n) => <option key={n} value={n}>{n}</option>)}
          </select>
        </label>
      </div>
      {rows.loading && !rows.data ? <Loading /> : null}
      <div class="split">
        <div class="table-wrap rows">
          <table>
            <thead>
              <tr><th>#</th>{columns.map((c) => <th key={c}>{c}</th>)}{columns.length === 0 ? <th>Value</th> : null}</tr>
            </thead>
            <tbody>
              {data.map((r) => (
                <tr
                  key={`${r.original_index}:${r.digest}`}
                  class={selected === r ? 'selected' : ''}
                  tabIndex={0}
                  onClick={() => setSelected(r)}
                  onKeyDown={(e) => (e.key === 'Enter' || e.key === ' ') && (e.preventDefault(), setSelected(r))}
                  aria-selected={selected === r}
                >
                  <td>{r.original_index}</td>
                  {columns.map((c) => <td key={c} class="cell">{preview((r.val as Record<string, unknown>)?.[c] ?? '', 60)}</td>)}
                  {columns.length === 0 ? <td class="cell">{preview(r.val, 100)}</td> : null}
                </tr>
              ))}
            </tbody>
          </table>
          {rows.data && data.length === 0 ? <Empty>No rows on this page.</Empty> : null}
        </div>
        {selected ? (
          <aside class="row-json" aria-label="Row JSON">
            <header>
              <h2>Row {selected.original_index}</h2>
              <button type="button" class="small" onClick={() => setSelected(null)}>Close</button>
            </header>
            <p class="mono small-text">{selected.digest}</p>
            <Json value={selected.val} />
          </aside>
        ) : null}
      </div>
    </>
  );
}
