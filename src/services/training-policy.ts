// What the training engine accepts, checked in the API before a job is queued, so a client hears about an
// unsupported option or unreadable data at once (400) instead of from a failed job. SFT data is resolved
// here to a JSONL file the workers can read (they never open the store): uploaded datasets and server files
// as they are, Hearth tables snapshotted to a content-addressed file.
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config/config.js';
import { datasetsDir } from '../config/config.js';
import type { TrainingPolicy } from './training-jobs.js';
import { parseDataUrl } from './data-urls.js';
import { Datasets } from './datasets.js';
import type { TableStore } from '../tables/table-store.js';
import { writeTableRowsJsonl } from '../tables/read-table-rows.js';
import { rlSettingsFromExperimentalConfig, unsupportedExperimentalKeys, unsupportedSftExperimentalKeys } from '../protocol/rl-settings.js';

/**
 * The policy of the training engine: which experimental_config keys it implements (src/protocol/rl-settings.ts,
 * the one parse of ART's settings that the worker uses too) and where SFT data is read from.
 */
export async function trainingPolicy(config: Pick<Config, 'home' | 'dataDirs'>, tables: TableStore | null): Promise<TrainingPolicy> {
  return {
    unsupportedRlKeys: (cfg) => unsupportedExperimentalKeys(cfg),
    unsupportedSftKeys: (cfg) => unsupportedSftExperimentalKeys(cfg),
    rlSettingsProblem: (cfg) => {
      try {
        rlSettingsFromExperimentalConfig(cfg);
        return null;
      } catch (err) {
        return (err as Error).message;
      }
    },
    resolveSftData: (entity, url) => resolveSftData(config, entity, url, tables),
  };
}

export async function resolveSftData(
  config: Pick<Config, 'home' | 'dataDirs'>,
  entity: string,
  url: string,
  tables: TableStore | null,
): Promise<{ path: string } | { error: string }> {
  const parsed = parseDataUrl(url);
  if ('error' in parsed) return parsed;
  switch (parsed.scheme) {
    case 'file': {
      // Server files are readable only inside the folders the operator lists in HEARTH_DATA_DIRS (off by
      // default: any key holder could otherwise train on, and probe, any file the server can read), and
      // Hearth's own state under HEARTH_HOME only in the caller's own datasets folder. Everything else
      // answers like a missing file, so it reveals nothing.
      const missing = { error: `training data file ${parsed.path} does not exist on the server or is outside HEARTH_DATA_DIRS` };
      if (!fs.existsSync(parsed.path) || !fs.statSync(parsed.path).isFile()) return missing;
      const real = fs.realpathSync(parsed.path);
      const home = fs.realpathSync(config.home);
      const ownDatasets = path.join(datasetsDir(home), entity);
      const allowed = [ownDatasets, ...config.dataDirs.filter((d) => fs.existsSync(d)).map((d) => fs.realpathSync(d))];
      if (!allowed.some((dir) => isInside(real, dir))) return missing;
      if (isInside(real, home) && !isInside(real, ownDatasets)) return missing;
      return { path: real };
    }
    case 'dataset': {
      const file = parsed.entity === entity ? new Datasets(config.home).file(parsed.entity, parsed.project, parsed.name, parsed.version) : null;
      return file ? { path: file } : {
            error:
              `dataset ${url} not found on this server; upload it with POST /v1/preview/datasets?project=<p>&name=<n>. ` +
              "Hearth does not host W&B Artifacts, where ART's model.train_sft() uploads its data: see docs/art.md (SFT without W&B)",
          };
    }
    case 'table': {
      const scope = { entity: parsed.entity, project: parsed.project };
      if (parsed.entity !== entity || !tables?.tableExists(scope, parsed.digest)) return { error: `table ${url} not found` };
      // A table digest names immutable content, so one snapshot per digest serves every job.
      const file = path.join(datasetsDir(config.home), parsed.entity, parsed.project, '.tables', `${parsed.digest}.jsonl`);
      if (!fs.existsSync(file)) {
        fs.mkdirSync(path.dirname(file), { recursive: true });
        await writeTableRowsJsonl(tables, parsed.entity, parsed.project, parsed.digest, file);
      }
      return { path: file };
    }
  }
}

/** `file` is `dir` or below it (both already resolved). */
function isInside(file: string, dir: string): boolean {
  const rel = path.relative(dir, file);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}
