// Small shared pieces: status badges, error and empty states, JSON blocks, a copy button.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';

export function Status({ status }: { status: string }) {
  return <span class={`badge badge-${status}`}>{status}</span>;
}

export function ErrorBox({ error }: { error: string | null }) {
  return error ? <p class="error" role="alert">{error}</p> : null;
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return <p class="muted" aria-busy="true">{what}…</p>;
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

export function Json({ value }: { value: unknown }) {
  return <pre class="json">{JSON.stringify(value, null, 2)}</pre>;
}

/** Copies `text`; where the clipboard API is unavailable (plain http on a LAN address) it selects the text instead. */
export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [done, setDone] = useState(false);
  const copy = async (e: Event) => {
    try {
      await navigator.clipboard.writeText(text);
      setDone(true);
      setTimeout(() => setDone(false), 1500);
    } catch {
      const code = (e.currentTarget as HTMLElement).previousElementSibling;
      if (code) getSelection()?.selectAllChildren(code);
    }
  };
  return (
    <button type="button" class="small" onClick={copy} title={`Copy ${text}`}>
      {done ? 'Copied' : label}
    </button>
  );
}

export function PageHeader({ title, children }: { title: ComponentChildren; children?: ComponentChildren }) {
  return (
    <header class="page-header">
      <h1>{title}</h1>
      <div class="actions">{children}</div>
    </header>
  );
}
