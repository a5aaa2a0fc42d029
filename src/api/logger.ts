// The pino options `hearth serve` runs with, in one place so tests exercise the real configuration.
// Keys never reach the log: request headers are redacted, URLs are logged without their query string
// (clients put keys in `?api_key=` and the like; the path and the request id are enough to trace a request)
// and key-shaped path segments are masked.
import type { FastifyRequest } from 'fastify';

/** Hearth keys (`hearth_` + base64url), should one be pasted into a path segment. */
const KEY_PATTERN = /hearth_[A-Za-z0-9_-]+/g;

/** The URL without its query string, and with anything shaped like a Hearth key masked. */
function loggableUrl(url: string): string {
  const q = url.indexOf('?');
  const pathPart = (q < 0 ? url : url.slice(0, q)).replace(KEY_PATTERN, 'hearth_…');
  return q < 0 ? pathPart : `${pathPart}?…`;
}

export function productionLoggerOptions(level: string) {
  return {
    level,
    redact: ['req.headers.authorization', 'req.headers.cookie', 'req.headers["proxy-authorization"]'],
    serializers: {
      req: (req: FastifyRequest) => ({
        method: req.method,
        url: loggableUrl(req.url),
        host: req.host,
        remoteAddress: req.ip,
        remotePort: req.socket?.remotePort,
      }),
    },
  };
}
