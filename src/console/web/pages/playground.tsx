// Playground: streaming chat with any base model or checkpoint, sampling controls, per-token logprobs on
// hover, and an optional second model answering the same conversation side by side.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Api } from '../lib/api';
import { blankMark, percent, pieceOfChunk, type Piece } from '../lib/tokens';
import { ErrorBox, PageHeader } from '../components/ui';

interface Turn { user: string }
interface Reply { pieces: Piece[]; error: string | null; done: boolean; finish: string | null }
interface Pane { model: string; replies: Reply[] }

function usePlaygroundModels(api: Api): string[] {
  const [names, setNames] = useState<string[]>([]);
  useEffect(() => {
    let stopped = false;
    (async () => {
      const served = await api.get<{ data: { id: string }[] }>('/v1/models');
      const trained = await api.get<{ data: { id: string }[] }>('/v1/preview/models');
      const steps = await Promise.all(
        trained.data.slice(0, 20).map((m) =>
          api.get<{ checkpoints: { inference_name: string }[] }>(`/v1/preview/models/${m.id}`).then((d) => d.checkpoints.map((c) => c.inference_name)).catch(() => []),
        ),
      );
      if (!stopped) setNames([...served.data.map((m) => m.id), ...steps.flat()]);
    })().catch(() => {});
    return () => {
      stopped = true;
    };
  }, [api]);
  return names;
}

function TokenSpan({ piece, active }: { piece: Piece; active: boolean }) {
  if (piece.tokens.length === 0) return <span>{piece.text}</span>;
  const lp = piece.tokens.reduce((a, t) => a + t.logprob, 0);
  const shade = Math.min(1, Math.max(0, -lp / 6));
  return (
    <span class={active ? 'tok active' : 'tok'} style={{ '--uncertainty': shade.toFixed(2) }} data-logprob={lp.toFixed(4)} data-mark={blankMark(piece.text) ?? undefined}>
      {piece.text}
      <span class="tok-tip" role="tooltip">
        {piece.tokens.map((t, i) => (
          <span key={i} class="tok-row">
            <b>{JSON.stringify(t.text)}</b> {t.logprob.toFixed(3)} ({percent(t.logprob)})
            {t.top.length ? (
              <span class="tok-top">
                {t.top.map((a, j) => <span key={j}>{JSON.stringify(a.text)} {percent(a.logprob)}</span>)}
              </span>
            ) : null}
          </span>
        ))}
      </span>
    </span>
  );
}

/**
 * An answer whose tokens can be inspected from the keyboard too: focus it (Tab), then ←/→ move through the
 * tokens and show each one's logprobs, Home/End jump, Escape hides.
 */
function Answer({ reply }: { reply: Reply | undefined }) {
  const [active, setActive] = useState<number | null>(null);
  const count = reply?.pieces.length ?? 0;
  const onKeyDown = (e: KeyboardEvent) => {
    const moves: Record<string, (i: number) => number> = {
      ArrowRight: (i) => Math.min(count - 1, i + 1), ArrowLeft: (i) => Math.max(0, i - 1), Home: () => 0, End: () => count - 1,
    };
    if (e.key === 'Escape') setActive(null);
    else if (moves[e.key] && count > 0) {
      e.preventDefault();
      setActive((i) => moves[e.key](i ?? -1));
    }
  };
  return (
    <div
      class="msg assistant"
      data-done={reply?.done ? 'true' : 'false'}
      tabIndex={0}
      aria-label="Answer: use the arrow keys to inspect each token's probability"
      onKeyDown={onKeyDown}
      onBlur={() => setActive(null)}
    >
      {reply?.pieces.map((p, j) => <TokenSpan key={j} piece={p} active={j === active} />)}
      {reply && !reply.done ? <span class="cursor" aria-hidden="true">▍</span> : null}
      {reply?.finish === 'length' ? <span class="muted small-text"> [max tokens]</span> : null}
      {reply?.finish === 'not asked' ? <span class="muted small-text">(this model was added after this message)</span> : null}
      {reply?.finish === 'stopped' ? <span class="muted small-text"> [stopped]</span> : null}
      <ErrorBox error={reply?.error ?? null} />
    </div>
  );
}

function Transcript({ turns, pane, label }: { turns: Turn[]; pane: Pane; label: string }) {
  const end = useRef<HTMLDivElement>(null);
  const last = pane.replies[pane.replies.length - 1];
  useEffect(() => end.current?.scrollIntoView({ block: 'nearest' }), [last?.pieces.length]);
  return (
    <section class="transcript" aria-label={label} aria-live="polite">
      <h2 class="pane-title">{pane.model || 'no model chosen'}</h2>
      {turns.map((t, i) => {
        const r = pane.replies[i];
        return (
          <div key={i} class="exchange">
            <div class="msg user">{t.user}</div>
            <Answer reply={r} />
          </div>
        );
      })}
      <div ref={end} />
    </section>
  );
}

export function PlaygroundPage({ api, initialModel }: { api: Api; initialModel: string | null }) {
  const models = usePlaygroundModels(api);
  const [turns, setTurns] = useState<Turn[]>([]);
  const [panes, setPanes] = useState<Pane[]>([{ model: initialModel ?? '', replies: [] }]);
  const [compare, setCompare] = useState(false);
  const [system, setSystem] = useState('');
  const [temperature, setTemperature] = useState(0.7);
  const [maxTokens, setMaxTokens] = useState(128);
  const [seed, setSeed] = useState('');
  const [input, setInput] = useState('');
  const [busy, setBusy] = useState(false);
  const aborts = useRef<AbortController[]>([]);

  useEffect(() => {
    if (!panes[0].model && models.length) setPanes((p) => [{ ...p[0], model: models[0] }, ...p.slice(1)]);
  }, [models]);
  useEffect(() => {
    setPanes((p) => (compare ? (p.length === 1 ? [...p, { model: models[1] ?? p[0].model, replies: p[0].replies.map(() => ({ pieces: [], error: null, done: true, finish: 'not asked' })) }] : p) : p.slice(0, 1)));
  }, [compare]);

  const setModel = (index: number, model: string) => setPanes((p) => p.map((pane, i) => (i === index ? { ...pane, model } : pane)));

  const updateReply = (paneIndex: number, turnIndex: number, change: (r: Reply) => Reply) =>
    setPanes((p) => p.map((pane, i) => (i !== paneIndex ? pane : { ...pane, replies: pane.replies.map((r, j) => (j === turnIndex ? change(r) : r)) })));

  const send = async (e?: Event) => {
    e?.preventDefault();
    const text = input.trim();
    if (!text || busy) return;
    const newTurns = [...turns, { user: text }];
    const turnIndex = turns.length;
    setTurns(newTurns);
    setInput('');
    setBusy(true);
    const current = panes;
    setPanes((p) => p.map((pane) => ({ ...pane, replies: [...pane.replies, { pieces: [], error: null, done: false, finish: null }] })));
    aborts.current = current.map(() => new AbortController());
    await Promise.all(
      current.map(async (pane, paneIndex) => {
        const messages: { role: string; content: string }[] = system.trim() ? [{ role: 'system', content: system.trim() }] : [];
        newTurns.forEach((t, i) => {
          messages.push({ role: 'user', content: t.user });
          if (i < turnIndex) messages.push({ role: 'assistant', content: pane.replies[i]?.pieces.map((p) => p.text).join('') ?? '' });
        });
        const body: Record<string, unknown> = { model: pane.model, messages, stream: true, temperature, max_tokens: maxTokens, logprobs: true, top_logprobs: 5 };
        if (seed.trim() !== '') body.seed = Number(seed);
        try {
          await api.stream('/v1/chat/completions', body, (chunk) => {
            const piece = pieceOfChunk(chunk);
            const finish = chunk?.choices?.[0]?.finish_reason ?? null;
            if (piece || finish) updateReply(paneIndex, turnIndex, (r) => ({ ...r, pieces: piece ? [...r.pieces, piece] : r.pieces, finish: finish ?? r.finish }));
          }, aborts.current[paneIndex].signal);
          updateReply(paneIndex, turnIndex, (r) => ({ ...r, done: true }));
        } catch (err) {
          const stopped = (err as Error).name === 'AbortError';
          updateReply(paneIndex, turnIndex, (r) => ({ ...r, done: true, error: stopped ? null : (err as Error).message, finish: stopped ? 'stopped' : r.finish }));
        }
      }),
    );
    setBusy(false);
  };

  const stop = () => aborts.current.forEach((a) => a.abort());
  const clear = () => {
    setTurns([]);
    setPanes((p) => p.map((pane) => ({ ...pane, replies: [] })));
  };

  return (
    <>
      <PageHeader title="Playground">
        <label class="inline"><input type="checkbox" checked={compare} onChange={(e) => setCompare(e.currentTarget.checked)} /> Compare two models</label>
        <button type="button" onClick={clear} disabled={busy || turns.length === 0}>Clear</button>
      </PageHeader>
      <datalist id="model-names">{models.map((m) => <option key={m} value={m} />)}</datalist>
      <div class="controls">
        {panes.map((pane, i) => (
          <label key={i} class="grow">
            {panes.length > 1 ? `Model ${i === 0 ? 'A' : 'B'}` : 'Model'}
            <input list="model-names" value={pane.model} onInput={(e) => setModel(i, e.currentTarget.value)} placeholder="hearth/tiny-random-llama or wandb-artifact:///…" />
          </label>
        ))}
        <label>Temperature <input type="number" min={0} max={2} step={0.1} value={temperature} onInput={(e) => setTemperature(Number(e.currentTarget.value))} /></label>
        <label>Max tokens <input type="number" min={1} max={4096} step={1} value={maxTokens} onInput={(e) => setMaxTokens(Number(e.currentTarget.value))} /></label>
        <label>Seed <input type="number" step={1} value={seed} placeholder="random" onInput={(e) => setSeed(e.currentTarget.value)} /></label>
      </div>
      <details class="system-prompt">
        <summary>System prompt</summary>
        <textarea rows={2} value={system} onInput={(e) => setSystem(e.currentTarget.value)} placeholder="You are a helpful assistant." />
      </details>
      <div class={`panes panes-${panes.length}`}>
        {panes.map((pane, i) => <Transcript key={i} turns={turns} pane={pane} label={`Answers of model ${i === 0 ? 'A' : 'B'}`} />)}
      </div>
      <p class="muted small-text">Hover a token (or focus an answer and use ← →) for its logprob and the top alternatives; darker tokens were less likely.</p>
      <form class="composer" onSubmit={send}>
        <textarea
          aria-label="Message"
          rows={2}
          value={input}
          placeholder="Send a message (Enter to send, Shift+Enter for a new line)"
          onInput={(e) => setInput(e.currentTarget.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) void send(e);
          }}
        />
        {busy ? <button type="button" onClick={stop}>Stop</button> : <button type="submit" class="primary" disabled={!input.trim() || panes.some((p) => !p.model)}>Send</button>}
      </form>
    </>
  );
}
