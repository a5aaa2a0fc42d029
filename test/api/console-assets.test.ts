// The console's page and bundle as `hearth serve` answers them: built in-process from src/console/web,
// nothing referenced outside this origin, cached by ETag; the API's own paths are unchanged.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => {
  s = await startServer();
});
afterAll(async () => s?.close());

describe('console assets', () => {
  it('serves the page at / with a same-origin CSP and its bundle under /console/', async () => {
    const page = await fetch(`${s.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'self'");
    const html = await page.text();
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(refs.filter((r) => /^(https?:)?\/\//.test(r))).toEqual([]);
    expect(refs.some((r) => r.startsWith('/console/app.js?v='))).toBe(true);
    expect(refs.some((r) => r.startsWith('/console/app.css?v='))).toBe(true);

    const js = await fetch(`${s.url}/console/app.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    const code = await js.text();
    expect(code.length).toBeGreaterThan(10_000);
    expect(code).not.toMatch(/https?:\/\/(?!127\.0\.0\.1|localhost|www\.w3\.org)[a-z0-9.-]+\.[a-z]{2,}\/[\w/.-]*\.(js|css|woff2?)/i);
    const etag = js.headers.get('etag')!;
    expect((await fetch(`${s.url}/console/app.js`, { headers: { 'if-none-match': etag } })).status).toBe(304);

    const css = await fetch(`${s.url}/console/app.css`);
    expect(css.status).toBe(200);
    expect(await css.text()).toContain('.u-legend'); // uPlot's stylesheet is bundled, not linked
    expect((await fetch(`${s.url}/console/nope.js`)).status).toBe(404);
  });

  it('leaves the API, /docs and /openapi.json where they were', async () => {
    expect((await s.call('GET', '/v1/health')).body).toEqual({ status: 'ok' });
    expect((await s.call('GET', '/openapi.json')).status).toBe(200);
    expect((await fetch(`${s.url}/docs`)).status).toBe(200);
    const doc = (await s.call('GET', '/openapi.json')).body;
    expect(Object.keys(doc.paths)).not.toContain('/');
  });
});
