// request.log is made lazily (src/api/logger.ts): the same lines as pino's own child logger, and no child at all
// for a request that logs nothing at an enabled level.
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { LazyRequestLogger, lazyChildLogger } from '../../src/api/logger.js';

function memoryLogger(level: string) {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { logger, lines };
}

describe('LazyRequestLogger', () => {
  it('writes what pino child() writes, bindings included, at enabled levels only', () => {
    const { logger, lines } = memoryLogger('warn');
    const log = lazyChildLogger(logger, { reqId: 'r1' }, {});
    expect(log).toBeInstanceOf(LazyRequestLogger);
    log.info('not written');
    log.debug({ a: 1 }, 'nor this');
    expect(lines).toHaveLength(0);
    log.warn({ a: 1 }, 'written');
    log.error(new Error('boom'));
    expect(lines.map((l) => [l.reqId, l.level, l.msg, l.a])).toEqual([
      ['r1', 40, 'written', 1],
      ['r1', 50, 'boom', undefined],
    ]);
    expect(log.level).toBe('warn');
  });

  it('makes no child until something logs at an enabled level, then only one', () => {
    const { logger } = memoryLogger('info');
    let children = 0;
    const child = logger.child.bind(logger);
    logger.child = ((...args: Parameters<typeof child>) => (children++, child(...args))) as typeof logger.child;
    const log = lazyChildLogger(logger, { reqId: 'r2' }, {});
    log.debug('below the level');
    expect(children).toBe(0);
    log.info('one');
    log.info('two');
    expect(children).toBe(1);
  });

  it('honours a level of its own (a route logLevel), and its children keep the bindings', () => {
    const { logger, lines } = memoryLogger('warn');
    const log = lazyChildLogger(logger, { reqId: 'r3' }, { level: 'debug' });
    log.debug('route-level debug');
    log.child({ step: 'x' }).info('from a grandchild');
    expect(lines.map((l) => [l.reqId, l.msg, l.step])).toEqual([
      ['r3', 'route-level debug', undefined],
      ['r3', 'from a grandchild', 'x'],
    ]);
  });
});
