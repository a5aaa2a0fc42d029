// SFT datasets uploaded to Hearth: JSONL files under HEARTH_HOME/datasets/<entity>/<project>/<name>/v<N>.jsonl,
// named by `wandb-artifact:///<entity>/<project>/<name>:v<N>` (the hosted artifact store has no offline twin).
import fs from 'node:fs';
import path from 'node:path';
import { datasetsDir } from '../config/config.js';
import { ValidationError, type ValidationIssue } from '../errors/domain-errors.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../domain/json-depth.js';

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
    if (nestsDeeperThan(line)) {
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

export class Datasets {
  constructor(private readonly home: string) {}

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
    const dir = this.dir(entity, project, name);
    fs.mkdirSync(dir, { recursive: true });
    const version = (this.versions(entity, project, name).pop() ?? -1) + 1;
    const tmp = path.join(dir, `.v${version}.jsonl.${process.pid}.tmp`);
    fs.writeFileSync(tmp, text);
    fs.renameSync(tmp, path.join(dir, `v${version}.jsonl`));
    return { version, rows, url: `wandb-artifact:///${entity}/${project}/${name}:v${version}` };
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
