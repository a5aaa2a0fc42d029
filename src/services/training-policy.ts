// What the training engine accepts, checked in the API before a job is queued, so a client hears about an
// unsupported option or unreadable data at once (400) instead of from a failed job.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '../config/config.js';
import type { TrainingPolicy } from './training-jobs.js';
import { parseDataUrl } from './data-urls.js';
import { Datasets } from './datasets.js';

const ENGINE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../worker/training/worker-handler.ts');

/** The policy of this build's training engine, or null when the build has none (job creation answers 501). */
export async function trainingPolicy(config: Config, hasTable?: (entity: string, project: string, digest: string) => boolean): Promise<TrainingPolicy | null> {
  if (!fs.existsSync(ENGINE) && !fs.existsSync(ENGINE.replace(/\.ts$/, '.js'))) return null;
  const rlConfig = '../../worker/training/rl-config.js'; // loaded only in builds that have the engine
  const { unsupportedExperimentalKeys } = (await import(rlConfig)) as { unsupportedExperimentalKeys: (c: unknown) => string[] };
  return {
    unsupportedRlKeys: (cfg) => unsupportedExperimentalKeys(cfg),
    checkSftDataUrl: (entity, url) => checkDataUrl(config, entity, url, hasTable),
  };
}

export function checkDataUrl(
  config: Pick<Config, 'home'>,
  entity: string,
  url: string,
  hasTable?: (entity: string, project: string, digest: string) => boolean,
): string | null {
  const parsed = parseDataUrl(url);
  if ('error' in parsed) return parsed.error;
  switch (parsed.scheme) {
    case 'file':
      return fs.existsSync(parsed.path) && fs.statSync(parsed.path).isFile() ? null : `training data file ${parsed.path} does not exist on the server`;
    case 'dataset': {
      const file = parsed.entity === entity ? new Datasets(config.home).file(parsed.entity, parsed.project, parsed.name, parsed.version) : null;
      return file ? null : `dataset ${url} not found; upload it with POST /v1/preview/datasets?project=<p>&name=<n>`;
    }
    case 'table':
      if (parsed.entity !== entity || !hasTable?.(parsed.entity, parsed.project, parsed.digest)) return `table ${url} not found`;
      return null;
  }
}
