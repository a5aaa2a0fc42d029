// Builds the services of one API process from its config and store.
import type { Config } from '../config/config.js';
import { checkpointsDir, datasetsDir, modelsDir } from '../config/config.js';
import type { Store } from '../store/sqlite/store.js';
import type { AppContext } from './context.js';
import { ApiKeys } from '../services/api-keys.js';
import { Datasets } from '../services/datasets.js';
import { StorageQuota } from '../services/storage-quota.js';
import { folderBytes, weaveBytes } from '../services/storage-usage.js';
import { HardwarePricing } from '../services/hardware-pricing.js';
import { HardwareCatalogue } from '../hardware/catalogue.js';
import { BaseModelCatalog } from '../models/base-models.js';
import { ModelsService } from '../services/models.js';
import { TrainingJobsService, type TrainingPolicy } from '../services/training-jobs.js';
import { NativeRunsService } from '../services/native-runs/runs.js';
import fs from 'node:fs';
import path from 'node:path';
import type { TrainingDispatcher, WorkerDirectory } from '../queue/port.js';
import type { QueueService } from '../queue/queue-service.js';

export interface ContainerOptions {
  catalog?: BaseModelCatalog;
  dispatcher?: TrainingDispatcher | null;
  policy?: TrainingPolicy | null;
  workers?: WorkerDirectory | null;
  queue?: QueueService | null;
  hardwareCatalogue?: HardwareCatalogue;
}

export function createContext(config: Config, store: Store, opts: ContainerOptions = {}): AppContext {
  const keys = new ApiKeys(store, config.apiKey ? { key: config.apiKey, entity: config.apiKeyEntity } : null);
  const catalog = opts.catalog ?? new BaseModelCatalog(modelsDir(config.home));
  const models = new ModelsService(store, catalog, checkpointsDir(config.home));
  const trainingJobs = new TrainingJobsService(store, models, opts.dispatcher ?? null, opts.policy ?? null);
  const nativeRuns = new NativeRunsService(store, models, catalog, trainingJobs, path.join(config.home, 'native-runs'));
  const storageQuota = new StorageQuota(config.storageQuotaBytes, (entity) => folderBytes(path.join(datasetsDir(config.home), entity)) + weaveBytes(store.db, entity));
  const datasets = new Datasets(config.home, { quota: storageQuota, jobUsing: (entity, file) => store.jobs.activeSftJobReading(entity, file) ?? store.jobs.activeSftJobReading(entity, fs.realpathSync(file)) });
  return { config, store, keys, catalog, models, trainingJobs, nativeRuns, workers: opts.workers ?? opts.queue ?? null, queue: opts.queue ?? null, datasets, storageQuota,
    hardware: new HardwarePricing(opts.hardwareCatalogue ?? HardwareCatalogue.fromEnv(), opts.queue ?? null),
  };
}
