// Keys never appear in logs (issue #9): the app is built with the production logger options
// (src/api/logger.ts, as `hearth serve` uses them) at level trace, writing to memory. Requests carry keys
// every way a client might send them — Bearer, Basic, malformed headers, the URL query, request bodies,
// unparsable HTTP — and the captured log must not contain any of them, in clear or base64, while it does
// contain the request ids.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { loadConfig, dbPath, modelsDir } from '../../src/config/config.js';
import { Store } from '../../src/store/sqlite/store.js';
import { createContext } from '../../src/api/container.js';
import { buildApp } from '../../src/api/app.js';
import { productionLoggerOptions } from '../../src/api/logger.js';
import { BaseModelCatalog } from '../../src/models/base-models.js';
import { installManifestOnly, tempHome } from '../helpers/server.js';

const BASE = 'log-pub/tiny-base';
const lines: string[] = [];
const memory = new Writable({
  write(chunk, _enc, done) {
    lines.push(chunk.toString());
    done();
  },
});

let app: FastifyInstance;
let store: Store;
let url: string;
let valid: string;
let revoked: string;
/** The automation key from HEARTH_API_KEY: any string, not only `hearth_…`. */
const ENV_KEY = 'env-automation-secret-0123456789';

/** Every form in which a key could leak: itself, its Basic encoding, and the stored-free prefix after `hearth_`. */
function forms(key: string): string[] {
  return [key, Buffer.from(`api:${key}`).toString('base64'), Buffer.from(key).toString('base64'), encodeURIComponent(key), key.slice(7)];
}

function rawExchange(text: string): Promise<string> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(u.port), u.hostname, () => socket.write(text));
    let out = '';
    socket.on('data', (d) => (out += d.toString()));
    socket.on('close', () => resolve(out));
    socket.on('error', reject);
  });
}

beforeAll(async () => {
  const home = tempHome('hearth-logs-');
  installManifestOnly(home, BASE);
  const config = { ...loadConfig({ HEARTH_HOME: home, HEARTH_WORKERS: 'none', HEARTH_API_KEY: ENV_KEY, HEARTH_ENTITY: 'ops' }), port: 0 };
  store = Store.open(dbPath(home));
  const ctx = createContext(config, store, { catalog: new BaseModelCatalog(modelsDir(home)) });
  app = await buildApp(ctx, { logger: { ...productionLoggerOptions('trace'), stream: memory } });
  url = await app.listen({ host: '127.0.0.1', port: 0 });
  valid = ctx.keys.create('alice').key;
  const r = ctx.keys.create('alice');
  ctx.keys.revoke(r.prefix);
  revoked = r.key;
});
afterAll(async () => {
  await app?.close();
  store?.close();
});

describe('logs', () => {
  it('never contain a key, however it was sent, and do contain request ids', async () => {
    const ids: string[] = [];
    const send = async (path: string, init: RequestInit & { headers?: Record<string, string> } = {}) => {
      const id = `log-test-${ids.length}`;
      ids.push(id);
      const res = await fetch(url + path, { ...init, headers: { ...(init.headers ?? {}), 'x-request-id': id } });
      await res.arrayBuffer();
      return res.status;
    };
    const json = { 'content-type': 'application/json' };
    const basic = (k: string) => `Basic ${Buffer.from(`api:${k}`).toString('base64')}`;

    expect(await send('/v1/models', { headers: { authorization: `Bearer ${valid}` } })).toBe(200);
    expect(await send('/v1/models', { headers: { authorization: `Bearer ${ENV_KEY}` } })).toBe(200);
    expect(await send('/v1/models', { headers: { authorization: `Bearer ${revoked}` } })).toBe(401);
    expect(await send('/table/query', { method: 'POST', headers: { ...json, authorization: basic(valid) }, body: JSON.stringify({ project_id: 'alice/p', digest: 'x' }) })).toBe(200);
    expect(await send('/table/query', { method: 'POST', headers: { ...json, authorization: basic(revoked) }, body: '{}' })).toBe(401);
    // keys in bad headers
    expect(await send('/v1/models', { headers: { authorization: valid } })).toBe(401);
    expect(await send('/v1/models', { headers: { authorization: `Token ${valid}` } })).toBe(401);
    expect(await send('/v1/models', { headers: { authorization: basic(valid) } })).toBe(401);
    expect(await send('/v1/models', { headers: { 'x-api-key': valid, 'api-key': revoked, cookie: `key=${valid}` } })).toBe(401);
    // keys in the URL query
    expect(await send(`/v1/models?api_key=${valid}`)).toBe(401);
    expect(await send(`/v1/usage?key=${revoked}&token=${ENV_KEY}`, { headers: { authorization: `Bearer ${valid}` } })).toBe(200);
    expect(await send(`/v1/preview/models/x/checkpoints?limit=${valid}`, { headers: { authorization: `Bearer ${valid}` } })).toBe(422);
    // keys in paths and bodies of failing requests, and errors of every kind
    expect(await send(`/v1/preview/training-jobs/${valid}`, { headers: { authorization: `Bearer ${valid}` } })).toBe(404);
    expect(await send(`/no/such/route/${valid}?api_key=${valid}`)).toBe(404);
    expect(await send('/v1/preview/models', { method: 'POST', headers: { ...json, authorization: `Bearer ${valid}` }, body: JSON.stringify({ project: valid, name: 'n', base_model: valid }) })).toBe(400);
    expect(await send('/v1/preview/models', { method: 'POST', headers: { ...json, authorization: `Bearer ${valid}` }, body: `{"key":"${valid}",` })).toBe(422);
    expect(await send('/v1/chat/completions', { method: 'POST', headers: { ...json, authorization: `Bearer ${valid}` }, body: JSON.stringify({ model: valid, messages: [{ role: 'user', content: valid }] }) })).toBe(503);
    expect(await send(`/v1/preview/models/%E0%A4%A?api_key=${valid}`, { headers: { authorization: `Bearer ${valid}` } })).toBe(400);
    expect(await send('/v1/preview/models', { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${valid}` }, body: '['.repeat(5000) })).toBe(400);
    // unparsable HTTP carrying a key (Node hands the raw bytes to the client-error handler)
    const garbage = await rawExchange(`GET /v1/models?api_key=${valid} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${valid}\r\nContent-Length: nope\r\n\r\n`);
    expect(garbage).toMatch(/^HTTP\/1\.1 400/);

    const log = lines.join('');
    // The log is not empty and traces requests: every id above appears (fetches carried `x-request-id`).
    expect(lines.length).toBeGreaterThan(ids.length);
    for (const id of ids) expect(log).toContain(`"reqId":"${id}"`);
    for (const key of [valid, revoked, ENV_KEY]) {
      for (const form of forms(key)) {
        const leak = lines.find((l) => l.includes(form));
        if (leak) throw new Error(`log contains ${form}: ${leak.slice(0, 600)}`);
      }
    }
    // Requests are still identifiable: method and path are logged, the query string is not.
    expect(log).toContain('"url":"/v1/usage?…"');
  });
});
