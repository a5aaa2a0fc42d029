import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { sendEvent } from '../../src/api/sse.js';

let server: http.Server | null = null;
afterEach(() => server?.close());

/** What the socket still holds right after an event is written one way or the other. */
async function afterWrite(write: (res: http.ServerResponse, text: string) => void): Promise<{ corked: number; pending: number; body: string }> {
  let seen = { corked: -1, pending: -1 };
  server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    write(res, 'data: {"x":1}\n\n');
    seen = { corked: res.socket!.writableCorked, pending: res.socket!.writableLength };
    res.end('data: [DONE]\n\n');
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const body = await (await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`)).text();
  return { ...seen, body };
}

describe('sendEvent', () => {
  it('hands the event to the socket at once, where a plain write stays corked until the next tick', async () => {
    const plain = await afterWrite((res, text) => res.write(text));
    expect(plain.corked).toBe(1); // Node's own cork: the premise of sendEvent
    expect(plain.pending).toBeGreaterThan(0);
    const sent = await afterWrite(sendEvent);
    expect(sent.corked).toBe(0);
    expect(sent.pending).toBe(0);
    expect(sent.body).toBe('data: {"x":1}\n\ndata: [DONE]\n\n');
  });
});
