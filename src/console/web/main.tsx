// The console's shell: sign-in gate, navigation, and the view for the current #/route.
import { render } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import './styles.css';
import { createApi, UNAUTHORIZED_EVENT } from './lib/api';
import { clearSession, loadSession, saveSession, type Session } from './lib/session';
import { href, useRoute } from './lib/route';
import { SignIn } from './pages/sign-in';
import { ModelPage, ModelsPage } from './pages/models';
import { JobsPage } from './pages/jobs';
import { JobPage } from './pages/job';
import { PlaygroundPage } from './pages/playground';
import { TablePage, TablesPage } from './pages/tables';
import { SystemPage } from './pages/system';

const SECTIONS = [
  { path: 'jobs', label: 'Training' },
  { path: 'models', label: 'Models' },
  { path: 'playground', label: 'Playground' },
  { path: 'tables', label: 'Tables' },
  { path: 'system', label: 'System' },
];

function App() {
  const [session, setSession] = useState<Session | null>(loadSession);
  const route = useRoute();
  const api = useMemo(() => (session ? createApi(session.key) : null), [session?.key]);
  // A key that stops working (revoked) signs the tab out instead of leaving every page in error.
  useEffect(() => {
    const signOut = () => {
      clearSession();
      setSession(null);
    };
    addEventListener(UNAUTHORIZED_EVENT, signOut);
    return () => removeEventListener(UNAUTHORIZED_EVENT, signOut);
  }, []);

  if (!session || !api) {
    return <SignIn onSignedIn={(s) => { saveSession(s); setSession(s); }} />;
  }
  const [section = 'jobs', id, extra] = route.parts;
  const view = (() => {
    switch (section) {
      case 'models': return id ? <ModelPage api={api} id={id} /> : <ModelsPage api={api} />;
      case 'jobs': return id ? <JobPage api={api} id={id} /> : <JobsPage api={api} modelId={route.query.get('model')} />;
      case 'playground': return <PlaygroundPage api={api} initialModel={route.query.get('model')} />;
      case 'tables': return extra ? <TablePage api={api} entity={session.entity} project={id} digest={extra} /> : <TablesPage api={api} entity={session.entity} project={id ?? null} />;
      case 'system': return <SystemPage api={api} />;
      default: return <p>Unknown page. <a href={href(['jobs'])}>Go to training jobs</a>.</p>;
    }
  })();
  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header class="topbar">
        <a class="brand" href={href(['jobs'])}><span class="logo" aria-hidden="true">◆</span> Hearth</a>
        <nav aria-label="Sections">
          {SECTIONS.map((s) => (
            <a key={s.path} href={href([s.path])} class={section === s.path ? 'active' : ''} aria-current={section === s.path ? 'page' : undefined}>{s.label}</a>
          ))}
        </nav>
        <div class="who">
          <span class="muted" title="The entity of your API key">{session.entity}</span>
          <button type="button" class="small" onClick={() => { clearSession(); setSession(null); }}>Sign out</button>
        </div>
      </header>
      <main id="main" tabIndex={-1} key={`${section}/${id ?? ''}/${extra ?? ''}`}>{view}</main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
