// One log format for every Hearth process: JSON lines as the API's logger (pino) writes them, so the API's request
// lines, its startup and queue notices, and every worker's lines read the same, each with its time:
//   {"level":30,"time":1764300000000,"pid":4242,"hostname":"gpu-1","worker":"inference","device":"cpu","msg":"…"}
// (level: pino's numbers, 30 info, 40 warn, 50 error; time: milliseconds since the epoch, as pino's default).
import os from 'node:os';

export type LineLevel = 'info' | 'warn' | 'error';
const LEVELS: Record<LineLevel | 'fatal' | 'debug' | 'trace', number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };

/** One line (pure but for the clock): pino's keys first, then `fields`, then the message. */
export function logLine(level: LineLevel, msg: string, fields: Record<string, unknown> = {}, now = Date.now()): string {
  return `${JSON.stringify({ level: LEVELS[level], time: now, pid: process.pid, hostname: os.hostname(), ...fields, msg })}\n`;
}

export type LineLog = (msg: string, level?: LineLevel) => void;

/**
 * A logger of plain messages that writes JSON lines to `stream`. `minLevel` (LOG_LEVEL: pino's names) drops the lines
 * below it; unknown names log everything.
 */
export function jsonLog(fields: Record<string, unknown>, opts: { stream?: NodeJS.WritableStream; minLevel?: string; level?: LineLevel } = {}): LineLog {
  const stream = opts.stream ?? process.stderr;
  const min = LEVELS[opts.minLevel as LineLevel] ?? 0;
  return (msg, level = opts.level ?? 'info') => {
    if (LEVELS[level] >= min) stream.write(logLine(level, msg, fields));
  };
}
