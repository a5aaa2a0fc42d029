// When a training worker announces a step before it blocks (worker/training/step-announcements.ts): the job's load
// stays announced through the first step, a step after one longer than a third of the heartbeat timeout is
// announced with twice that time, short steps never are, and nothing stays announced after the job.
import { describe, expect, it } from 'vitest';
import { ModelLoads } from '../../worker/model-loads.js';
import { nextStepAnnouncement, StepAnnouncements } from '../../worker/training/step-announcements.js';

describe('nextStepAnnouncement', () => {
  it('announces after a step of a third of the heartbeat timeout or more, for twice its time (at least the timeout)', () => {
    expect(nextStepAnnouncement(4_999, 15_000)).toBeNull();
    expect(nextStepAnnouncement(5_000, 15_000)).toBe(15_000);
    expect(nextStepAnnouncement(504_500, 15_000)).toBe(1_009_000);
  });
});

describe('StepAnnouncements', () => {
  it('covers the load and the first step, then only the steps after long ones', async () => {
    const loads = new ModelLoads();
    let now = 0;
    const a = new StepAnnouncements(loads, 'm', 15_000, () => now);
    const announced = () => loads.current().map(({ model, step, expectedMs }) => ({ model, step, expectedMs }));
    await a.start();
    expect(announced()).toEqual([{ model: 'm', step: undefined, expectedMs: undefined }]);
    now = 30_000;
    await a.after('training_started');
    expect(announced()).toHaveLength(1); // the first step runs under the load's announcement
    now = 30_000 + 200_000; // step 1: 200 s
    await a.after('gradient_step');
    expect(announced()).toEqual([{ model: 'm', step: 2, expectedMs: 400_000 }]);
    now += 1_000; // step 2: 1 s
    await a.after('gradient_step');
    expect(announced()).toEqual([]);
    now += 6_000; // step 3: 6 s
    await a.after('gradient_step');
    expect(announced()).toEqual([{ model: 'm', step: 4, expectedMs: 15_000 }]);
    await a.after('training_ended');
    expect(announced()).toEqual([]);
    a.stop();
    expect(announced()).toEqual([]);
  });

  it('withdraws everything when the job stops early', async () => {
    const loads = new ModelLoads();
    const a = new StepAnnouncements(loads, 'm', 15_000, () => 0);
    await a.start();
    a.stop();
    expect(loads.current()).toEqual([]);
  });
});
