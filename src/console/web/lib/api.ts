// The console's only door to Hearth: the public HTTP API, with the signed-in key as a Bearer token.
import { SseParser } from './sse';

export class ApiError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** The message of an error body in any of the API's shapes ({detail}, {reason}, OpenAI {error}, 422 items). */
export function errorMessage(status: number, body: unknown): string {
  const b = body as { detail?: unknown; reason?: unknown; error?: { message?: unknown } } | null;
  if (b && typeof b.detail === 'string') return b.detail;
  if (b && Array.isArray(b.detail)) return b.detail.map((i: { loc?: unknown[]; msg?: string }) => `${(i.loc ?? []).join('.')}: ${i.msg}`).join('; ');
  if (b && typeof b.reason === 'string') return b.reason;
  if (b && b.error && typeof b.error.message === 'string') return b.error.message;
  return `HTTP ${status}`;
}

export interface Api {
  get<T>(path: string): Promise<T>;
  post<T>(path: string, body: unknown): Promise<T>;
  del<T>(path: string, body?: unknown): Promise<T>;
  /** POST a text body as it is (a JSONL dataset upload), with its content type. */
  upload<T>(path: string, text: string, contentType: string): Promise<T>;
  /** POST and hand each server-sent event's parsed JSON to `onEvent` until [DONE] or the end. */
  stream(path: string, body: unknown, onEvent: (data: any) => void, signal?: AbortSignal): Promise<void>;
}

/** Fired on `window` when the API answers 401 to the signed-in key (revoked, or the server's keys changed). */
export const UNAUTHORIZED_EVENT = 'hearth:unauthorized';

export function createApi(key: string): Api {
  const headers = (json: boolean): Record<string, string> => ({
    authorization: `Bearer ${key}`,
    ...(json ? { 'content-type': 'application/json' } : {}),
  });
  const call = async <T>(method: string, path: string, body?: unknown, raw?: { text: string; contentType: string }): Promise<T> => {
    const init = raw
      ? { method, headers: { ...headers(false), 'content-type': raw.contentType }, body: raw.text }
      : { method, headers: headers(body !== undefined), body: body === undefined ? undefined : JSON.stringify(body) };
    const res = await fetch(path, init);
    const text = await res.text();
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = text;
    }
    if (!res.ok) {
      if (res.status === 401) dispatchEvent(new Event(UNAUTHORIZED_EVENT));
      throw new ApiError(res.status, errorMessage(res.status, parsed));
    }
    return parsed as T;
  };
  return {
    get: (path) => call('GET', path),
    post: (path, body) => call('POST', path, body),
    del: (path, body) => call('DELETE', path, body),
    upload: (path, text, contentType) => call('POST', path, undefined, { text, contentType }),
    async stream(path, body, onEvent, signal) {
      const res = await fetch(path, { method: 'POST', headers: headers(true), body: JSON.stringify(body), signal });
      if (!res.ok || !res.body) {
        const text = await res.text();
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          /* keep the text */
        }
        throw new ApiError(res.status, errorMessage(res.status, parsed));
      }
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      const parser = new SseParser();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        for (const data of parser.push(value)) {
          if (data === '[DONE]') return;
          const event = JSON.parse(data);
          if (event && event.error) throw new ApiError(500, errorMessage(500, event));
          onEvent(event);
        }
      }
    },
  };
}
