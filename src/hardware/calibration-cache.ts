// Measured throughput of a model on a device configuration. The inference worker runs the
// calibration (a timed prefill and decode) and records it here; pricing reads it back.
// An entry is valid only for the exact model file (hash) and device fingerprint it was measured on:
// a re-imported model or a driver update makes it stale, and the worker measures again.
import { z } from 'zod';

export interface Throughput {
  /** Prompt tokens processed per second. */
  prefillTps: number;
  /** Generated tokens per second. */
  decodeTps: number;
}

export const CalibrationEntry = z.object({
  modelId: z.string(),
  modelFileHash: z.string(),
  /** DeviceConfig key (device fingerprint). */
  deviceKey: z.string(),
  prefillTps: z.number().positive(),
  decodeTps: z.number().positive(),
  measuredAt: z.string(),
});
export type CalibrationEntry = z.infer<typeof CalibrationEntry>;

export class CalibrationCache {
  /** One entry per (model, device): a new measurement replaces the old one whatever its hash. */
  private readonly entries = new Map<string, CalibrationEntry>();

  constructor(entries: Iterable<CalibrationEntry> = []) {
    for (const e of entries) this.record(e);
  }

  private static slot(modelId: string, deviceKey: string): string {
    return JSON.stringify([modelId, deviceKey]);
  }

  /** The measurement for this model file on this device, or undefined if missing or stale. */
  get(modelId: string, modelFileHash: string, deviceKey: string): CalibrationEntry | undefined {
    const entry = this.entries.get(CalibrationCache.slot(modelId, deviceKey));
    return entry && entry.modelFileHash === modelFileHash ? entry : undefined;
  }

  needsCalibration(modelId: string, modelFileHash: string, deviceKey: string): boolean {
    return this.get(modelId, modelFileHash, deviceKey) === undefined;
  }

  record(entry: CalibrationEntry): void {
    const valid = CalibrationEntry.parse(entry);
    this.entries.set(CalibrationCache.slot(valid.modelId, valid.deviceKey), { ...valid });
  }

  /** Drops every entry of a model (e.g. when it is deleted). */
  forgetModel(modelId: string): void {
    for (const [slot, e] of this.entries) if (e.modelId === modelId) this.entries.delete(slot);
  }

  /** The `throughput` callback hardwareOptions takes, for one model file. */
  throughputFor(modelId: string, modelFileHash: string): (deviceKey: string) => Throughput | undefined {
    return (deviceKey) => {
      const e = this.get(modelId, modelFileHash, deviceKey);
      return e && { prefillTps: e.prefillTps, decodeTps: e.decodeTps };
    };
  }

  toJSON(): CalibrationEntry[] {
    return [...this.entries.values()].map((e) => ({ ...e }));
  }

  static fromJSON(data: unknown): CalibrationCache {
    return new CalibrationCache(z.array(CalibrationEntry).parse(data));
  }
}
