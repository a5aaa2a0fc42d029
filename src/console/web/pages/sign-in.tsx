// Sign in with an API key: checked against GET /v1/system, which also names the key's entity.
import { useState } from 'preact/hooks';
import { createApi } from '../lib/api';
import type { Session } from '../lib/session';
import { ErrorBox } from '../components/ui';

export function SignIn({ onSignedIn }: { onSignedIn: (s: Session) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const system = await createApi(key.trim()).get<{ entity: string }>('/v1/system');
      onSignedIn({ key: key.trim(), entity: system.entity });
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="sign-in">
      <form onSubmit={submit} class="card">
        <h1>
          <span class="logo" aria-hidden="true">◆</span> Hearth console
        </h1>
        <p class="muted">Sign in with an API key. It stays in this browser tab only (session storage).</p>
        <label>
          API key
          <input id="api-key" type="password" autoComplete="off" required autoFocus value={key} onInput={(e) => setKey(e.currentTarget.value)} />
        </label>
        <ErrorBox error={error} />
        <button type="submit" class="primary" disabled={busy || !key.trim()}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        <p class="muted small-text">
          Create a key with <code>npx hearth keys create --entity my-team</code>. API reference: <a href="/docs">/docs</a>.
        </p>
      </form>
    </main>
  );
}
