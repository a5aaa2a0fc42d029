// The pino options `hearth serve` runs with, in one place so tests exercise the real configuration.
// Keys never reach the log: request headers are redacted, URLs are logged without their query string
// (clients put keys in `?api_key=` and the like; the path and the request id are enough to trace a request)
// and key-shaped path segments are masked.
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

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

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type LogArgs = Parameters<FastifyBaseLogger['info']>;

/**
 * `request.log`, made when something first logs through it at an enabled level. Fastify makes a child logger
 * (bound to the request id) for every request; pino's child() cost ~0.03 ms of an inference request's time to
 * first token when requests come between model steps (cold caches, 2 cores), and at `warn` most requests never log.
 */
export class LazyRequestLogger implements FastifyBaseLogger {
  private made: FastifyBaseLogger | null = null;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private get real(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.options));
  }

  private log(level: Level, args: LogArgs): void {
    // A child with its own level (a route's logLevel) decides for itself.
    if (this.made || this.options.level !== undefined || this.parent.isLevelEnabled(level)) (this.real[level] as (...a: LogArgs) => void)(...args);
  }

  get level() {
    return this.made?.level ?? this.options.level ?? this.parent.level;
  }
  set level(level) {
    this.real.level = level;
  }
  fatal(...args: LogArgs) { this.log('fatal', args); }
  error(...args: LogArgs) { this.log('error', args); }
  warn(...args: LogArgs) { this.log('warn', args); }
  info(...args: LogArgs) { this.log('info', args); }
  debug(...args: LogArgs) { this.log('debug', args); }
  trace(...args: LogArgs) { this.log('trace', args); }
  silent() {}
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real.child(bindings, options);
  }
}

/** Fastify's `childLoggerFactory`: a LazyRequestLogger when the app's logger is pino (the logger Fastify makes from options). */
export function lazyChildLogger(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  const parent = logger as Partial<Logger>;
  return typeof parent.isLevelEnabled === 'function' ? new LazyRequestLogger(logger as Logger, bindings, options) : logger.child(bindings, options);
}
