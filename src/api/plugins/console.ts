// Serves the console: GET / answers its page, GET /console/<file> its bundled assets (src/console).
// Outside the OpenAPI document and open without a key: the page holds no data; it calls the API with the
// key the user signs in with. A strict Content-Security-Policy keeps the page to this origin (air-gapped).
import type { FastifyInstance } from 'fastify';
import { consoleBundle } from '../../console/bundle.js';
import { consoleIndexHtml } from '../../console/index-html.js';

const CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'";

export function registerConsole(app: FastifyInstance): void {
  app.get('/', async (_request, reply) => {
    const { assets } = await consoleBundle();
    const version = { js: assets.get('app.js')?.etag ?? '', css: assets.get('app.css')?.etag ?? '' };
    return reply
      .type('text/html; charset=utf-8')
      .header('cache-control', 'no-cache')
      .header('content-security-policy', CSP)
      .header('x-content-type-options', 'nosniff')
      .send(consoleIndexHtml({ js: version.js.replaceAll('"', ''), css: version.css.replaceAll('"', '') }));
  });
  app.get<{ Params: { file: string } }>('/console/:file', async (request, reply) => {
    const { assets } = await consoleBundle();
    const asset = assets.get(request.params.file);
    if (!asset) return reply.code(404).send({ detail: 'Not Found' });
    if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
    return reply
      .type(asset.contentType)
      .header('etag', asset.etag)
      .header('cache-control', 'public, max-age=31536000, immutable')
      .header('x-content-type-options', 'nosniff')
      .send(asset.body);
  });
}
