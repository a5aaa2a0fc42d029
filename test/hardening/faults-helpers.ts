// A minimal SSE reader for fault tests: how did one streaming chat completion end, and when?
// (The openai client hides the raw `data: {"error": …}` event a server sends after streaming began.)

export interface StreamOutcome {
  /** HTTP status of the response (an error status means the request failed before streaming). */
  status: number;
  /** `data:` events received before the end, parsed (except `[DONE]`). */
  chunks: unknown[];
  /** The stream ended with `data: [DONE]`. */
  done: boolean;
  /** The `error` object of an error event, or the body of an error response. */
  error: unknown;
  /** The connection broke without either of the above (a defect: clients cannot tell what happened). */
  broken: string | null;
  endedMs: number;
}

/** Run one streaming request to its end; `onChunk` sees each data event as it arrives. */
export async function streamChat(url: string, key: string, body: Record<string, unknown>, onChunk?: (n: number) => void): Promise<StreamOutcome> {
  const out: StreamOutcome = { status: 0, chunks: [], done: false, error: null, broken: null, endedMs: 0 };
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, stream: true }),
    });
    out.status = res.status;
    if (res.status !== 200) {
      out.error = await res.json().catch(() => 'unreadable error body');
      return out;
    }
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let cut: number;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const event = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        if (!event.startsWith('data: ')) continue;
        const data = event.slice(6);
        if (data === '[DONE]') out.done = true;
        else {
          const parsed = JSON.parse(data) as { error?: unknown };
          if (parsed.error) out.error = parsed.error;
          else {
            out.chunks.push(parsed);
            onChunk?.(out.chunks.length);
          }
        }
      }
    }
    if (!out.done && !out.error) out.broken = 'the stream ended without [DONE] or an error event';
  } catch (err) {
    out.broken = (err as Error).message;
  } finally {
    out.endedMs = Date.now();
  }
  return out;
}
