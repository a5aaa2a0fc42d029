// Freed memory kept for reuse while a training engine lives, through glibc's malloc tunables (mallopt, called by FFI:
// koffi). Why: ONNX Runtime allocates every tensor of a session without a memory arena from malloc, and glibc hands
// out each block over its mmap threshold (at most 32 MB) as a fresh mapping and unmaps it at free, so every large
// tensor of every run is page-faulted in and zeroed by the kernel again. The engine's big sessions run without
// arenas where an arena per session would keep too much for good (graph-engine.ts, arenasAffordable: an 8B layer's
// dequantized weights, 32 layers), and the cost is the kernel's: an 8B Q4_K step of 256 tokens took 349 s on an
// AMD EPYC (Zen 5, 2 cores) with 5 of its 7 minutes in the kernel, and 54 s with freed blocks kept in the heap
// (docs/benchmarks.md). While an engine lives: no mmap (M_MMAP_MAX 0) and no trimming (M_TRIM_THRESHOLD unbounded),
// so a freed block is the next run's; after the last engine, glibc's defaults again and malloc_trim(0), which gives
// the free pages back (an idle training worker must not sit on an 8B step's 10 GB: it kept 9.7 GiB before).
//
// The heap does not always reuse what it keeps: ONNX Runtime's blocks are 64-byte aligned, and glibc's aligned
// allocations leave small pieces beside each big one that can keep two freed neighbours apart, so a run may take new
// memory while an old block of nearly its size sits free (a test pattern of one 256 MB tensor a run grew by 256 MB a
// run under vitest). trimFreedMemory, after every micro-batch (train-step.ts), gives back the pages of whatever is
// free at that point once the heap holds more than 1 GiB free (mallinfo2), so what it keeps is bounded; the next
// micro-batch then faults its tensors in once, not at every run.
//
// Process-wide and counted: nested engines (a KL reference beside the trained model) hold it once. Where it cannot
// apply (not glibc, no koffi binary for the platform) nothing changes and the reason is given once.
import { createRequire } from 'node:module';

/** glibc's mallopt parameters (malloc.h) and their defaults. */
const M_TRIM_THRESHOLD = -1;
const M_MMAP_MAX = -4;
const DEFAULT_TRIM_THRESHOLD = 128 * 1024;
const DEFAULT_MMAP_MAX = 65536;

interface Glibc {
  mallopt(param: number, value: number): number;
  malloc_trim(pad: number): number;
  /** Bytes free in the heap (mallinfo2's fordblks), or null without mallinfo2 (glibc before 2.33). */
  freeBytes(): number | null;
}

/** What the heap may keep free after a micro-batch before trimFreedMemory gives it back. */
export const KEEP_FREE_BYTES = 2 ** 30;

let glibc: Glibc | string | undefined; // loaded, or why not
let holders = 0;

const noFfi = (err: unknown) => `no FFI: ${(err as Error).message.split('\n')[0]}`;

function load(): Glibc | string {
  const asked = process.env.HEARTH_TRAIN_HOLD_FREED;
  if (asked !== undefined && asked !== '' && asked !== '0' && asked !== '1') throw new Error(`HEARTH_TRAIN_HOLD_FREED must be 0 or 1, got "${asked}"`);
  if (asked === '0') return 'HEARTH_TRAIN_HOLD_FREED=0';
  if (process.platform !== 'linux') return `not Linux (${process.platform})`;
  // glibc is asked by FFI, not through process.report.getReport(): that report queries the network for the process's
  // interfaces and open sockets (a worker's Redis connections), synchronously, which took minutes on some systems
  // (nodejs/node#46060); an air-gapped host's resolver is a likely one.
  let koffi: typeof import('koffi');
  try {
    koffi = createRequire(import.meta.url)('koffi') as typeof import('koffi');
  } catch (err) {
    return noFfi(err);
  }
  let libc: ReturnType<typeof koffi.load>;
  try {
    libc = koffi.load('libc.so.6'); // glibc's soname (musl's C library is named otherwise)
    (libc.func('const char *gnu_get_libc_version()') as () => string)();
  } catch {
    return 'not glibc';
  }
  try {
    let mallinfo2: (() => { fordblks: number | bigint }) | null = null;
    try {
      const fields = ['arena', 'ordblks', 'smblks', 'hblks', 'hblkhd', 'usmblks', 'fsmblks', 'uordblks', 'fordblks', 'keepcost'];
      koffi.struct('hearth_mallinfo2', Object.fromEntries(fields.map((f) => [f, 'size_t'])));
      mallinfo2 = libc.func('hearth_mallinfo2 mallinfo2()');
    } catch {
      // glibc before 2.33: trimmed after every micro-batch instead
    }
    return {
      mallopt: libc.func('int mallopt(int param, int value)'),
      malloc_trim: libc.func('int malloc_trim(size_t pad)'),
      freeBytes: () => (mallinfo2 ? Number(mallinfo2().fordblks) : null),
    };
  } catch (err) {
    return noFfi(err);
  }
}

/** Keep freed memory for reuse until the returned function is called; `held` says whether it applies here, `reason` why not. */
export function holdFreedMemory(): { held: boolean; reason?: string; release: () => void } {
  const c = (glibc ??= load());
  if (typeof c === 'string') return { held: false, reason: c, release: () => {} };
  if (holders++ === 0) {
    c.mallopt(M_MMAP_MAX, 0);
    c.mallopt(M_TRIM_THRESHOLD, -1); // an int: -1 is SIZE_MAX to glibc, never trim
  }
  let released = false;
  return {
    held: true,
    release: () => {
      if (released) return;
      released = true;
      if (--holders > 0) return;
      c.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD);
      c.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX);
      c.malloc_trim(0);
    },
  };
}

/**
 * While held: give back the pages of the heap's free blocks (their addresses stay reserved for reuse) once more than
 * `keep` bytes are free. Not every time: a trim makes the next micro-batch fault in even its small tensors again
 * (a 0.5B LoRA step ran 20–30% slower trimmed after each micro-batch).
 */
export function trimFreedMemory(keep = KEEP_FREE_BYTES): void {
  if (holders === 0 || glibc === undefined || typeof glibc === 'string') return;
  const free = glibc.freeBytes();
  if (free === null || free > keep) glibc.malloc_trim(0);
}
