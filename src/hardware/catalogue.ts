// From live workers and stored models to the hardware list. Workers send their DeviceReport with
// every heartbeat; several workers on one host send the same inventory, so the newest report per
// host is kept, and the devices the inference workers are bound to say which of them can serve.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { DeviceReport, type HardwareResponse } from '../protocol/hardware.js';
import { CalibrationCache } from './calibration-cache.js';
import { DEFAULT_COSTS, type HardwareCosts, loadCosts } from './costs.js';
import type { DeviceSlot } from './device-config.js';
import { hardwareOptions } from './pricing.js';

/** What the hardware catalogue needs of a worker (a subset of the queue port's WorkerInfo). */
export interface LiveWorker {
  kind: string;
  /** The worker's `--device`: "cpu", "cuda:0", "rocm:1", … */
  device: string;
  host: string;
  /** Its DeviceReport as received (unknown: it crossed a process boundary). */
  devices?: unknown;
}

/** One valid report per host, the most recently detected; malformed reports are skipped. */
export function latestReports(workers: readonly LiveWorker[]): DeviceReport[] {
  const byHost = new Map<string, DeviceReport>();
  for (const w of workers) {
    const parsed = DeviceReport.safeParse(w.devices);
    if (!parsed.success) continue;
    const current = byHost.get(parsed.data.host);
    if (!current || current.detectedAt < parsed.data.detectedAt) byHost.set(parsed.data.host, parsed.data);
  }
  return [...byHost.values()];
}

/**
 * The devices inference workers serve on. The host is the one in the worker's own report (the
 * name detection saw), falling back to the heartbeat's host.
 */
export function servingSlots(workers: readonly LiveWorker[]): DeviceSlot[] {
  return workers
    .filter((w) => w.kind === 'inference')
    .map((w) => {
      const parsed = DeviceReport.safeParse(w.devices);
      return { host: parsed.success ? parsed.data.host : w.host, device: w.device };
    });
}

/** The parts of a model store manifest (src/models/model-store.ts ModelManifest) pricing reads. */
const ManifestForPricing = z.object({
  id: z.string(),
  parameters: z.number().positive(),
  sizeBytes: z.number().nonnegative(),
  importedAt: z.string(),
});

/**
 * Workers hold weights as f32 (src/runtime/model-config.ts Tensor32), whatever the file's
 * dtype, so memory need is 4 bytes per parameter.
 */
export const RUNTIME_BYTES_PER_PARAM = 4;

/**
 * Identifies one import of a model's files: calibrations are keyed by it, so a re-import (new
 * files) asks for a new measurement. The inference worker and the API both derive it from the
 * manifest, so they agree without passing hashes of multi-GB files around.
 */
export function modelFingerprint(manifest: unknown): string {
  const m = ManifestForPricing.parse(manifest);
  return createHash('sha256').update(JSON.stringify([m.id, m.importedAt, m.sizeBytes, m.parameters])).digest('hex').slice(0, 16);
}

/**
 * The API's hardware catalogue: hourly costs (loaded once), calibrations reported by inference
 * workers, and the options for `GET /inference/{vendor}/v2/hardware`.
 */
export class HardwareCatalogue {
  constructor(
    readonly costs: HardwareCosts = DEFAULT_COSTS,
    readonly calibration: CalibrationCache = new CalibrationCache(),
  ) {}

  /** Costs from HEARTH_PRICING_FILE (throws, naming the file, if it is unreadable or invalid). */
  static fromEnv(env: NodeJS.ProcessEnv = process.env): HardwareCatalogue {
    return new HardwareCatalogue(loadCosts(env));
  }

  /** Options for one model (its manifest as stored) on the devices of the live workers. */
  optionsFor(input: { workers: readonly LiveWorker[]; manifest: unknown; vendor: string }): HardwareResponse {
    const m = ManifestForPricing.parse(input.manifest);
    const hardware = hardwareOptions({
      devices: latestReports(input.workers),
      serving: servingSlots(input.workers),
      model: { id: m.id, paramCount: m.parameters, bytesPerParam: RUNTIME_BYTES_PER_PARAM },
      throughput: this.calibration.throughputFor(m.id, modelFingerprint(m)),
      vendor: input.vendor,
      costs: this.costs,
    });
    return { hardware };
  }
}
