// The training worker announces every stretch that blocks its event loop — the load, then each step and the
// checkpoint's write — so the API waits HEARTH_LOAD_TIMEOUT, not HEARTH_HEARTBEAT_TIMEOUT, for its next heartbeat.
// Without it a step longer than 15 s (an 8B LoRA step on a CPU takes minutes) got the worker declared dead and killed.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { makeTinyModel } from '../../src/synthetic-models/tiny-model.js';
import { LocalArtifacts } from '../../worker/artifacts/local-artifacts.js';
import { ModelLoads } from '../../worker/model-loads.js';
import { createHandlers } from '../../worker/training/worker-handler.js';
import type { TrainingTask } from '../../src/protocol/messages.js';

const root = mkdtempSync(join(tmpdir(), 'hearth-steps-announced-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

it('announces the load and each step until the job returns', async () => {
  const modelDir = join(root, 'model');
  makeTinyModel({ dir: modelDir, size: 'tiny', seed: 5 });
  const data = join(root, 'train.jsonl');
  const row = (q: string, a: string) => JSON.stringify({ messages: [{ role: 'user', content: q }, { role: 'assistant', content: a }] });
  writeFileSync(data, `${row('Capital of France?', 'Paris')}\n${row('2+2?', '4')}\n`);

  const loads = new ModelLoads();
  const trace: string[] = [];
  loads.onChange(() => void trace.push(`loading [${loads.current().map((l) => l.model).join(', ')}]`));
  const handlers = await createHandlers('cpu', () => {}, loads, LocalArtifacts.fromEnv({ HEARTH_STORAGE: 'shared' }, () => {}));
  const task = {
    kind: 'sft', jobId: 'job-1', entity: 'e', modelId: 'm', baseModel: 'test/tiny', baseModelDir: modelDir, step: 1,
    outputDir: join(root, 'out', 'step-1'), initCheckpointDir: null, home: root,
    payload: { resolved_data_path: data, config: { batch_size: 1, learning_rate: 1e-3 } },
  } as TrainingTask;
  const events: string[] = [];
  // Where each event finds the announcements: the stretch before it has ended (the heartbeat says so at once).
  const atEvents: number[] = [];
  await handlers.training!(task, {
    emit: (type) => { events.push(type); atEvents.push(loads.current().length); },
    checkpoint: () => {},
    cancelled: () => false,
    log: () => {},
  });
  await new Promise((r) => setImmediate(r));

  expect(events).toEqual(['training_started', 'gradient_step', 'gradient_step']);
  expect(atEvents).toEqual([0, 0, 0]);
  // The load, then one stretch after each event (the next step; after the last, the checkpoint's write).
  const begun = trace.filter((t) => t !== 'loading []');
  expect(begun).toEqual(['loading [test/tiny]', ...Array(3).fill('loading [test/tiny (training step)]')]);
  expect(loads.current()).toEqual([]);
}, 180_000);
