// What a device costs to run for an hour, in US cents: the numerator of every token price.
// Defaults are rough on-demand cloud list prices (2025) by GPU memory class and per CPU core;
// an operator replaces them with their own through HEARTH_PRICING_FILE (see docs/configuration.md).
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { DeviceConfig } from './device-config.js';

const GpuMemoryTier = z.object({
  /** Upper bound of the class in GiB (inclusive); null = no bound (the last, largest class). */
  upToGiB: z.number().positive().nullable(),
  centsPerHour: z.number().nonnegative(),
});

export const HardwareCosts = z.object({
  /** GPU classes by memory, smallest first; a GPU takes the first class its memory fits in. */
  gpuTiers: z.array(GpuMemoryTier).min(1),
  /** A CPU replica costs this per logical core and hour. */
  cpuCentsPerCoreHour: z.number().nonnegative(),
  /** Exact device names (case-insensitive) with their own hourly price; wins over gpuTiers. */
  byDeviceName: z.record(z.string(), z.number().nonnegative()),
});
export type HardwareCosts = z.infer<typeof HardwareCosts>;

export const DEFAULT_COSTS: HardwareCosts = {
  gpuTiers: [
    { upToGiB: 16, centsPerHour: 40 }, // T4, RTX 4080 class
    { upToGiB: 24, centsPerHour: 80 }, // L4, A10G, RTX 4090
    { upToGiB: 48, centsPerHour: 150 }, // L40S, A6000, A40
    { upToGiB: 80, centsPerHour: 250 }, // A100 / H100 80 GB, MI250X GCD
    { upToGiB: null, centsPerHour: 400 }, // H200, B200, MI300X
  ],
  cpuCentsPerCoreHour: 4,
  byDeviceName: {},
};

/** A pricing file or object may give any subset of the keys; the rest keep their defaults. */
export const HardwareCostsOverride = HardwareCosts.partial().strict();

export function mergeCosts(base: HardwareCosts, override: unknown): HardwareCosts {
  const parsed = HardwareCostsOverride.safeParse(override);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new Error(`invalid hardware pricing: ${issues}`);
  }
  const merged = { ...base, ...parsed.data, byDeviceName: { ...base.byDeviceName, ...parsed.data.byDeviceName } };
  merged.gpuTiers = [...merged.gpuTiers].sort((a, b) => (a.upToGiB ?? Infinity) - (b.upToGiB ?? Infinity));
  return merged;
}

/**
 * Costs from `HEARTH_PRICING_FILE` (a JSON file) merged over the defaults; defaults if unset.
 * Synchronous: it runs once at start, next to the rest of the configuration.
 */
export function loadCosts(env: NodeJS.ProcessEnv = process.env): HardwareCosts {
  const file = env.HEARTH_PRICING_FILE;
  if (!file) return DEFAULT_COSTS;
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new Error(`HEARTH_PRICING_FILE=${file}: ${(error as Error).message}`);
  }
  try {
    return mergeCosts(DEFAULT_COSTS, data);
  } catch (error) {
    throw new Error(`HEARTH_PRICING_FILE=${file}: ${(error as Error).message}`);
  }
}

/** Hourly cost in cents of one replica on this configuration. */
export function hourlyCostCents(config: Pick<DeviceConfig, 'vendor' | 'name' | 'memoryMiB' | 'cores'>, costs: HardwareCosts): number {
  const named = Object.entries(costs.byDeviceName).find(([name]) => name.toLowerCase() === config.name.toLowerCase());
  if (named) return named[1];
  if (config.vendor === 'cpu') return (config.cores ?? 1) * costs.cpuCentsPerCoreHour;
  const gib = config.memoryMiB / 1024;
  const tier = costs.gpuTiers.find((t) => t.upToGiB === null || gib <= t.upToGiB) ?? costs.gpuTiers[costs.gpuTiers.length - 1];
  return tier.centsPerHour;
}
