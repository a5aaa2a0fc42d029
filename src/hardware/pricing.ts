// Hardware options with token prices for one model: the body of `GET /inference/:vendor/v2/hardware`.
//
//   price (cents per million tokens) = device cost per hour / tokens per hour × 1,000,000
//
// Input tokens are priced from measured prefill throughput, output tokens from decode throughput.
// Prices are rounded UP to the next 0.01 cent, so a very fast device never shows a price of 0.
import { createHash } from 'node:crypto';
import type { DeviceReport, HardwareOption, HardwareVendor } from '../protocol/hardware.js';
import type { Throughput } from './calibration-cache.js';
import { DEFAULT_COSTS, type HardwareCosts, hourlyCostCents } from './costs.js';
import { type DeviceConfig, type DeviceSlot, deviceConfigs } from './device-config.js';
import { estimateMemoryNeedMiB } from '../domain/memory-fit.js';

const VENDORS: readonly HardwareVendor[] = ['nvidia', 'amd', 'cpu'];

export interface PricedModel {
  id: string;
  paramCount: number;
  bytesPerParam: number;
  /** Known KV cache budget in MiB; otherwise memory-fit.ts's default headroom. */
  kvCacheMiB?: number;
}

export interface HardwareOptionsInput {
  /** Latest report of every live worker host. */
  devices: readonly DeviceReport[];
  /** Devices inference workers are bound to (catalogue.ts servingSlots); omitted = every reported device. */
  serving?: readonly DeviceSlot[];
  model: PricedModel;
  /** Measured throughput of this model on a configuration (by DeviceConfig key); undefined = not calibrated. */
  throughput: (deviceKey: string) => Throughput | undefined;
  /** The path's `{vendor}`: nvidia, amd or cpu (case-insensitive); anything else lists nothing. */
  vendor: string;
  costs?: HardwareCosts;
}

/** Rounds up to hundredths; the epsilon keeps 0.07 (7.000000000000001 after ×100) at 0.07. */
function ceilToHundredth(x: number): number {
  return Math.ceil(x * 100 - 1e-9) / 100;
}

export function centsPerMillionTokens(centsPerHour: number, tokensPerSecond: number): number {
  if (!(tokensPerSecond > 0)) throw new Error(`centsPerMillionTokens: tokensPerSecond must be positive, got ${tokensPerSecond}`);
  if (!(centsPerHour >= 0)) throw new Error(`centsPerMillionTokens: centsPerHour must be >= 0, got ${centsPerHour}`);
  if (centsPerHour === 0) return 0; // a free device stays free
  return Math.max(0.01, ceilToHundredth((centsPerHour / (tokensPerSecond * 3600)) * 1e6));
}

function slug(text: string): string {
  return text.toLowerCase().replace(/\(r\)|\(tm\)/g, '').replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
}

/** Stable, URL-safe id: readable prefix plus a short hash of the full configuration key. */
export function optionId(config: DeviceConfig): string {
  const name = slug(config.name);
  const prefix = name.startsWith(config.vendor) ? name : `${config.vendor}-${name}`;
  const hash = createHash('sha256').update(config.key).digest('hex').slice(0, 8);
  return `${prefix}-${hash}`;
}

function optionName(config: DeviceConfig): string {
  if (config.vendor === 'cpu') return `${config.name}, ${config.cores} cores`;
  return `${config.name} (${Math.round(config.memoryMiB / 1024)} GiB)`;
}

function tps(x: number): string {
  return (Math.round(x * 10) / 10).toString();
}

function specs(config: DeviceConfig, model: PricedModel, needMiB: number, costCents: number, t: Throughput): Record<string, string> {
  const s: Record<string, string> = {
    vendor: config.vendor,
    device: config.name,
    devices_per_replica: '1',
    device_count: String(config.count),
    hosts: String(config.hosts.length),
    memory_mib: String(config.memoryMiB),
    model_memory_estimate_mib: String(needMiB),
    model_parameters: String(model.paramCount),
    prefill_tokens_per_second: tps(t.prefillTps),
    decode_tokens_per_second: tps(t.decodeTps),
    cost_cents_per_hour: String(costCents),
  };
  if (config.driver !== undefined) s.driver = config.driver;
  if (config.computeCapability !== undefined) s.compute_capability = config.computeCapability;
  if (config.cores !== undefined) s.cores = String(config.cores);
  if (config.simd !== undefined) s.simd = config.simd.join(',');
  return s;
}

/**
 * One serverless option per device configuration of the requested vendor that the model fits on
 * and that has a calibration for it. Sorted by output price, then id.
 */
export function hardwareOptions(input: HardwareOptionsInput): HardwareOption[] {
  const vendor = input.vendor.toLowerCase() as HardwareVendor;
  if (!VENDORS.includes(vendor)) return [];
  const costs = input.costs ?? DEFAULT_COSTS;
  const needMiB = estimateMemoryNeedMiB(input.model);
  const options: HardwareOption[] = [];
  for (const config of deviceConfigs(input.devices, input.serving)) {
    if (config.vendor !== vendor || needMiB > config.memoryMiB) continue;
    const measured = input.throughput(config.key);
    if (!measured) continue;
    const costCents = hourlyCostCents(config, costs);
    options.push({
      id: optionId(config),
      name: optionName(config),
      type: 'serverless',
      pricing: {
        cents_per_million_input_tokens: centsPerMillionTokens(costCents, measured.prefillTps),
        cents_per_million_output_tokens: centsPerMillionTokens(costCents, measured.decodeTps),
      },
      specs: specs(config, input.model, needMiB, costCents, measured),
    });
  }
  return options.sort(
    (a, b) => a.pricing.cents_per_million_output_tokens - b.pricing.cents_per_million_output_tokens || a.id.localeCompare(b.id),
  );
}

/** Configurations of a vendor the model fits on but has no measurement for: what to calibrate next. */
export function uncalibratedConfigs(input: Omit<HardwareOptionsInput, 'costs'>): DeviceConfig[] {
  const vendor = input.vendor.toLowerCase();
  const needMiB = estimateMemoryNeedMiB(input.model);
  return deviceConfigs(input.devices, input.serving).filter(
    (c) => c.vendor === vendor && needMiB <= c.memoryMiB && input.throughput(c.key) === undefined,
  );
}
