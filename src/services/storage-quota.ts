// Storage quota per entity (tenant): the bytes it stores in datasets, Weave tables and Weave objects together
// stay under HEARTH_STORAGE_QUOTA_BYTES. A write that would pass it is refused (413, `storage_quota_exceeded`,
// in its route family's shape) before anything is stored.
//
// Measuring an entity exactly reads every value it stores (storage-usage.ts), so it is done once per entity and
// then kept as an estimate: each admitted write adds its request's size (an upper bound: content-addressed rows and
// objects already stored take no more room), each delete subtracts what it freed. Only a write the estimate would
// refuse measures again, so a stale estimate never refuses a write the exact figure would let through.
import { DomainError } from '../errors/domain-errors.js';

export class StorageQuota {
  private readonly estimate = new Map<string, number>();

  /**
   * @param limitBytes bytes one entity may store; 0: no quota.
   * @param measure the exact bytes an entity stores now.
   */
  constructor(
    readonly limitBytes: number,
    private readonly measure: (entity: string) => number,
  ) {}

  /** Count a write of `bytes` for `entity`, or throw (413) if it would pass the quota. */
  admit(entity: string, bytes: number): void {
    if (this.limitBytes <= 0) return;
    let used = this.estimate.get(entity);
    if (used === undefined || used + bytes > this.limitBytes) used = this.measure(entity);
    if (used + bytes > this.limitBytes) {
      this.estimate.set(entity, used);
      throw new DomainError(
        'too_large',
        `Storage quota exceeded: your entity stores ${formatBytes(used)} of its ${formatBytes(this.limitBytes)} (HEARTH_STORAGE_QUOTA_BYTES) and this write adds ${formatBytes(bytes)}; delete datasets you no longer need (DELETE /v1/preview/datasets) to free room`,
        { code: 'storage_quota_exceeded' },
      );
    }
    this.estimate.set(entity, used + bytes);
  }

  /** `bytes` of `entity`'s were deleted. */
  freed(entity: string, bytes: number): void {
    const used = this.estimate.get(entity);
    if (used !== undefined) this.estimate.set(entity, Math.max(0, used - bytes));
  }
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(1)} ${units[u]}`;
}

/** The size of a write request's body: its Content-Length, or (chunked uploads) its parsed body as JSON. */
export function requestBodyBytes(headers: Record<string, string | string[] | undefined>, body: unknown): number {
  const declared = Number(headers['content-length']);
  if (Number.isFinite(declared) && declared > 0) return declared;
  return Buffer.byteLength(JSON.stringify(body) ?? '');
}
