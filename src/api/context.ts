// What route files may use: the services, built once per app (container.ts).
import type { Config } from '../config/config.js';
import type { Store } from '../store/sqlite/store.js';
import type { ApiKeys } from '../services/api-keys.js';
import type { BaseModelCatalog } from '../models/base-models.js';
import type { ModelsService } from '../services/models.js';
import type { TrainingJobsService } from '../services/training-jobs.js';
import type { NativeRunsService } from '../services/native-runs/runs.js';
import type { WorkerDirectory } from '../queue/port.js';
import type { QueueService } from '../queue/queue-service.js';
import type { Datasets } from '../services/datasets.js';
import type { StorageQuota } from '../services/storage-quota.js';
import type { HardwarePricing } from '../services/hardware-pricing.js';

export interface AppContext {
  config: Config;
  store: Store;
  keys: ApiKeys;
  catalog: BaseModelCatalog;
  models: ModelsService;
  trainingJobs: TrainingJobsService;
  nativeRuns: NativeRunsService;
  workers: WorkerDirectory | null;
  /** Present when workers are attached (always in `hearth serve`; tests may leave it out). */
  queue: QueueService | null;
  datasets: Datasets;
  /** Bytes each entity may store in datasets, tables and objects (HEARTH_STORAGE_QUOTA_BYTES). */
  storageQuota: StorageQuota;
  hardware: HardwarePricing;
}
