// Freed memory kept for reuse while a training engine lives (worker/training/graph/freed-memory.ts). By default glibc
// maps every block over 32 MB afresh and unmaps it at free, so a session without an arena faults each large tensor in
// at every run and the process is back to its size after the run; while held, freed blocks stay in the heap (the
// process keeps the run's tensor resident after the run); trimFreedMemory and the release give those pages back.
// How much of what the heap keeps is reused is the benchmarks' to measure (docs/benchmarks.md, bench:train).
import { describe, expect, it, vi } from 'vitest';
import { DataType, GraphBuilder } from '../../src/runtime/onnx-proto.js';
import { GraphSession } from '../../worker/training/graph/graph-session.js';
import { holdFreedMemory, trimFreedMemory } from '../../worker/training/graph/freed-memory.js';

const ELEMENTS = 64 * 2 ** 20; // 256 MB of float32
const BYTES = 4 * ELEMENTS;
const MiB = 2 ** 20;

/** sum(expand(x, [ELEMENTS])): one transient tensor of 256 MB per run. */
function transientSession(): GraphSession {
  const g = new GraphBuilder();
  const x = g.input('x', DataType.FLOAT, [1]);
  g.node('ReduceSum', [g.op('Expand', [x, g.int64s([ELEMENTS])]), g.int64s([0])], { outputs: ['sum'], attrs: { keepdims: 0 } });
  g.output('sum', DataType.FLOAT, []);
  return GraphSession.load(g.toModelBytes('transient', 18), { arena: false, threads: 1 });
}

const rss = () => process.memoryUsage().rss;

/** RSS growth over one run, and the run's minor page faults. */
function oneRun(session: GraphSession, before = rss()): { grew: number; faults: number } {
  const faults = process.resourceUsage().minorPageFault;
  expect(session.run({ x: { data: Float32Array.of(0.5), dims: [1] } }).host('sum').data[0]).toBe(ELEMENTS / 2);
  return { grew: rss() - before, faults: process.resourceUsage().minorPageFault - faults };
}

describe('freed memory held for a training engine (glibc)', () => {
  const probe = holdFreedMemory();
  probe.release();

  it.skipIf(!probe.held)('keeps a run\'s freed tensor resident while held, and gives it back on a trim and on the release', () => {
    const session = transientSession();
    const unheld = oneRun(session);
    const hold = holdFreedMemory();
    const base = rss();
    const held = oneRun(session, base);
    const grewHeld = rss() - base;
    trimFreedMemory(2 * BYTES); // under the limit: kept
    const keptUnderLimit = rss() - base;
    trimFreedMemory(0);
    const afterTrim = rss() - base;
    oneRun(session);
    hold.release();
    const afterRelease = rss() - base;
    session.dispose();
    console.log(`training-freed-memory: a run of a 256 MB tensor: ${Math.round(unheld.grew / MiB)} MB kept and ${unheld.faults} faults by default; ${Math.round(grewHeld / MiB)} MB kept held, ${Math.round(afterTrim / MiB)} MB after a trim, ${Math.round(afterRelease / MiB)} MB after the release`);
    expect(unheld.faults).toBeGreaterThan((0.9 * BYTES) / 4096); // faulted in…
    expect(unheld.grew).toBeLessThan(BYTES / 4); // …and unmapped at free
    expect(held.faults).toBeGreaterThan((0.9 * BYTES) / 4096);
    expect(grewHeld).toBeGreaterThan(0.9 * BYTES); // kept in the heap
    expect(keptUnderLimit).toBeGreaterThan(0.9 * BYTES);
    expect(afterTrim).toBeLessThan(BYTES / 4);
    expect(afterRelease).toBeLessThan(BYTES / 4);
  }, 60_000);

  it('says why where it cannot hold', () => {
    expect(probe.held || typeof probe.reason === 'string').toBe(true);
  });

  it('takes HEARTH_TRAIN_HOLD_FREED as 0 or 1 and refuses anything else by name', async () => {
    const fresh = async (value: string) => {
      vi.resetModules(); // the module decides once per process
      process.env.HEARTH_TRAIN_HOLD_FREED = value;
      return import('../../worker/training/graph/freed-memory.js');
    };
    try {
      const off = (await fresh('0')).holdFreedMemory();
      expect(off).toMatchObject({ held: false, reason: 'HEARTH_TRAIN_HOLD_FREED=0' });
      const { holdFreedMemory: hold } = await fresh('yes');
      expect(() => hold()).toThrow('HEARTH_TRAIN_HOLD_FREED must be 0 or 1, got "yes"');
      const on = (await fresh('1')).holdFreedMemory();
      on.release();
      expect(on.held).toBe(probe.held);
    } finally {
      delete process.env.HEARTH_TRAIN_HOLD_FREED;
      vi.resetModules();
    }
  });
});
