// Server-sent events on a raw Node response (the inference routes stream completion chunks this way).
import type { ServerResponse } from 'node:http';

/**
 * Write one SSE event and send it now. Node corks a chunked response's socket on each write until the next
 * tick, and that tick first runs whatever the worker's next IPC messages bring (other streams' tokens, a
 * finished request's last chunk and usage booking): a 1-token request's first event waited 0.13 ms behind
 * them (1.1B, 2 cores).
 */
export function sendEvent(raw: ServerResponse, text: string): void {
  raw.write(text);
  raw.socket?.uncork();
}
