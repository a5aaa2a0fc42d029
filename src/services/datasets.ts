// SFT datasets uploaded to Hearth: JSONL files under HEARTH_HOME/datasets/<entity>/<project>/<name>/v<N>.jsonl,
// named by `wandb-artifact:///<entity>/<project>/<name>:v<N>` (the hosted artifact store has no offline twin).
import fs from 'node:fs';
import path from 'node:path';
import { datasetsDir } from '../config/config.js';
import { conflict, notFound, ValidationError, type ValidationIssue } from '../errors/domain-errors.js';
import type { StorageQuota } from './storage-quota.js';
import { MAX_JSON_DEPTH } from '../domain/json-depth.js';
import { exceedsJsonBudget } from '../domain/json-budget.js';

/** Problems of SFT JSONL text: each line must be an object with a non-empty `messages` array. */
export function validateSftJsonl(text: string, maxIssues = 20): { rows: number; issues: ValidationIssue[] } {
  const issues: ValidationIssue[] = [];
  let rows = 0;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length && issues.length < maxIssues; i++) {
    const line = lines[i].trim();
    if (!line) continue;
    const loc = ['body', `line ${i + 1}`];
    let row: unknown;
    // Rows are walked recursively when training reads them: refuse what the JSON body parser refuses.
    if (exceedsJsonBudget(line, { maxValues: Number.POSITIVE_INFINITY, maxDepth: MAX_JSON_DEPTH })) {
      issues.push({ loc, msg: `JSON nested deeper than ${MAX_JSON_DEPTH} levels`, type: 'json_invalid' });
      continue;
    }
    try {
      row = JSON.parse(line);
    } catch (err) {
      issues.push({ loc, msg: `not valid JSON: ${(err as Error).message}`, type: 'json_invalid' });
      continue;
    }
    const messages = (row as { messages?: unknown })?.messages;
    if (!row || typeof row !== 'object' || Array.isArray(row)) issues.push({ loc, msg: 'each line must be a JSON object', type: 'dict_type' });
    else if (!Array.isArray(messages) || messages.length === 0) issues.push({ loc: [...loc, 'messages'], msg: 'messages must be a non-empty list', type: 'list_type' });
    else if (messages.some((m) => !m || typeof m !== 'object' || typeof (m as { role?: unknown }).role !== 'string')) {
      issues.push({ loc: [...loc, 'messages'], msg: 'every message needs a string role', type: 'value_error' });
    } else rows++;
  }
  if (rows === 0 && issues.length === 0) issues.push({ loc: ['body'], msg: 'the dataset has no rows', type: 'too_short' });
  return { rows, issues };
}

export interface DatasetsOptions {
  /** Bytes per entity (storage-quota.ts); none when absent. */
  quota?: StorageQuota;
  /** The id of a queued or running job that reads `file`, if any: its dataset may not be deleted. */
  jobUsing?: (entity: string, file: string) => string | null;
}

export class Datasets {
  constructor(
    private readonly home: string,
    private readonly opts: DatasetsOptions = {},
  ) {}

  private dir(entity: string, project: string, name: string): string {
    return path.join(datasetsDir(this.home), entity, project, name);
  }

  versions(entity: string, project: string, name: string): number[] {
    const dir = this.dir(entity, project, name);
    if (!fs.existsSync(dir)) return [];
    return fs
      .readdirSync(dir)
      .map((f) => /^v(\d+)\.jsonl$/.exec(f))
      .filter((m): m is RegExpExecArray => !!m)
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
  }

  /** Store a new version; the file appears whole or not at all. */
  save(entity: string, project: string, name: string, text: string): { version: number; rows: number; url: string } {
    const { rows, issues } = validateSftJsonl(text);
    if (issues.length) throw new ValidationError(issues);
    this.opts.quota?.admit(entity, Buffer.byteLength(text));
    const dir = this.dir(entity, project, name);
    fs.mkdirSync(dir, { recursive: true });
    const deleted = fs.readdirSync(dir).map((f) => /^\.v(\d+)\.deleted$/.exec(f)).filter((m): m is RegExpExecArray => !!m).map((m) => Number(m[1]));
    const version = Math.max(this.versions(entity, project, name).pop() ?? -1, ...deleted) + 1;
    const tmp = path.join(dir, `.v${version}.jsonl.${process.pid}.tmp`);
    fs.writeFileSync(tmp, text);
    fs.renameSync(tmp, path.join(dir, `v${version}.jsonl`));
    return { version, rows, url: `wandb-artifact:///${entity}/${project}/${name}:v${version}` };
  }

  /**
   * Delete one version (`v3`, `3`, `latest`) or, without one, every version of a dataset; 404 when there is none,
   * 409 while a queued or running job reads one of them. Answers the versions deleted and the bytes freed.
   */
  delete(entity: string, project: string, name: string, version?: string): { versions: number[]; bytes: number } {
    const dir = this.dir(entity, project, name);
    const files = version === undefined ? this.versions(entity, project, name).map((v) => path.join(dir, `v${v}.jsonl`)) : [this.file(entity, project, name, version)].filter((f): f is string => f !== null);
    const what = `dataset ${entity}/${project}/${name}${version === undefined ? '' : `:${version}`}`;
    if (files.length === 0) throw notFound(`${what} not found`);
    for (const file of files) {
      const job = this.opts.jobUsing?.(entity, file) ?? null;
      if (job) throw conflict(`${what} cannot be deleted: training job ${job} (queued or running) reads ${path.basename(file)}; cancel it or wait for it to end`);
    }
    let bytes = 0;
    const versions: number[] = [];
    for (const file of files) {
      bytes += fs.statSync(file).size;
      const v = Number(/v(\d+)\.jsonl$/.exec(file)![1]);
      // An empty marker keeps the number taken: a later upload never reuses it, so a URL never names other data.
      fs.writeFileSync(path.join(dir, `.v${v}.deleted`), '');
      fs.rmSync(file, { force: true });
      versions.push(v);
    }
    this.opts.quota?.freed(entity, bytes);
    return { versions, bytes };
  }

  /** The file of a version (`v3`, `3`, or `latest`), or null. */
  file(entity: string, project: string, name: string, version: string): string | null {
    const versions = this.versions(entity, project, name);
    const m = /^v?(\d+)$/.exec(version);
    const v = version === 'latest' ? versions[versions.length - 1] : m ? Number(m[1]) : undefined;
    if (v === undefined || !versions.includes(v)) return null;
    return path.join(this.dir(entity, project, name), `v${v}.jsonl`);
  }
}
