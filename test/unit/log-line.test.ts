// One log format (src/domain/log-line.ts): pino's JSON line shape, with the time, fields and message.
import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { jsonLog, logLine } from '../../src/domain/log-line.js';

const sink = () => {
  const lines: string[] = [];
  const stream = new Writable({ write: (chunk, _enc, cb) => (lines.push(String(chunk)), cb()) });
  return { lines, stream };
};

describe('log lines', () => {
  it('are one JSON object a line, with pino\'s level numbers, the time, pid, hostname, fields, then the message', () => {
    const line = logLine('warn', 'Redis connection lost', { worker: 'inference', device: 'cpu' }, 1_764_300_000_000);
    expect(line.endsWith('\n')).toBe(true);
    expect(line.trim().includes('\n')).toBe(false);
    const parsed = JSON.parse(line);
    expect(parsed).toMatchObject({ level: 40, time: 1_764_300_000_000, pid: process.pid, worker: 'inference', device: 'cpu', msg: 'Redis connection lost' });
    expect(typeof parsed.hostname).toBe('string');
    expect(Object.keys(parsed)).toEqual(['level', 'time', 'pid', 'hostname', 'worker', 'device', 'msg']);
  });

  it('a message with newlines (a stack) stays on one line', () => {
    expect(logLine('error', 'failed:\n  at x').split('\n')).toHaveLength(2);
  });

  it('jsonLog drops lines below LOG_LEVEL and uses its default level', () => {
    const { lines, stream } = sink();
    const log = jsonLog({ a: 1 }, { stream, minLevel: 'warn', level: 'info' });
    log('hidden');
    log('shown', 'warn');
    log('also shown', 'error');
    expect(lines.map((l) => JSON.parse(l).msg)).toEqual(['shown', 'also shown']);
    const all = sink();
    jsonLog({}, { stream: all.stream })('plain');
    expect(JSON.parse(all.lines[0])).toMatchObject({ level: 30, msg: 'plain' });
  });
});
