// The inference worker's task handler (loaded by worker/default-handlers.ts): one engine per base
// model, loaded on first use with LoRA inputs so checkpoints are served as adapters on top of the
// shared base weights. The adapter's events (src/protocol/inference-events.ts: each chunk, then the
// result or error) go to the host through ctx.emit as they are; the host reports them to the API, which
// writes chunks out as SSE events and books a stream's `{ usage }` result. Cancellation (client
// gone) frees the sequences at once. The `calibrate` op measures prefill/decode speed on this device
// for hardware pricing (see calibrate.ts).
//
// Tuning (environment): HEARTH_KV_CACHE_MB (default 1024), HEARTH_MAX_NUM_SEQS (16),
// HEARTH_MAX_BATCHED_TOKENS (512), HEARTH_PREFILL_CHUNK_TOKENS (auto: sized from measured step times, or a number), HEARTH_MAX_CONTEXT (model's, capped at 8192 by the runtime),
// HEARTH_INTRA_OP_THREADS (ONNX Runtime threads per model; default one per core), HEARTH_WEIGHTS
// (f32, or q4: 4-bit projections quantized at load, 2-4× faster decode and 6× smaller, at some accuracy).

import type { InferenceTask } from '../../src/protocol/messages.js';
import { deviceKeyOf } from '../../src/hardware/device-config.js';
import { parseServedWeights } from '../../src/config/config.js';
import { detectDevices } from '../../src/hardware/detect.js';
import { deviceMemoryOf } from '../../src/hardware/device-memory-of.js';
import { calibrate } from './calibrate.js';
import { CancelledError, TaskError, type Handlers, type InferenceContext } from '../handlers.js';
import { faultPointBlocking } from '../../src/runtime/fault-points.js';
import { ModelLoads } from '../model-loads.js';
import { LocalArtifacts } from '../artifacts/local-artifacts.js';
import { loadModel, type LoadedModel } from '../../src/runtime/load-model.js';
import { createEngineFromRuntime, type HearthEngine, type InferenceEvent, type InferenceHandle } from './openai-adapter.js';

interface ServedModel {
  /** The base model's name, as requests give it. */
  name: string;
  loaded: LoadedModel;
  hearth: HearthEngine;
}

function envNumber(name: string): number | undefined {
  const v = process.env[name];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got "${v}"`);
  return n;
}

/** HEARTH_PREFILL_CHUNK_TOKENS: 'auto' (also when unset: the engine's default) or a whole number of tokens. */
function prefillChunkSetting(): number | 'auto' | undefined {
  const v = process.env.HEARTH_PREFILL_CHUNK_TOKENS;
  if (v === undefined || v === '') return undefined;
  if (v === 'auto') return 'auto';
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`HEARTH_PREFILL_CHUNK_TOKENS must be 'auto' or a whole number ≥ 1, got "${v}"`);
  return n;
}

/**
 * @param loads where model loads are announced: a load blocks this process's event loop (graph build, ORT session
 *   creation), so the API is told before it starts and waits HEARTH_LOAD_TIMEOUT instead of the heartbeat timeout.
 */
/** Exit status of a worker whose device was lost (EX_TEMPFAIL): its supervisor starts a new one. */
export const EXIT_DEVICE_LOST = 75;

/**
 * @param exit how the worker leaves for its supervisor when its device is lost (tests pass their own).
 */
export async function createHandlers(
  device: string, log: (m: string) => void, loads = new ModelLoads(), artifacts = LocalArtifacts.fromEnv(process.env, log),
  exit: (code: number) => void = (code) => process.exit(code),
): Promise<Handlers> {
  const weightType = parseServedWeights(process.env.HEARTH_WEIGHTS); // checked when the worker starts, not at first use
  const models = new Map<string, Promise<ServedModel>>();
  const loadedEngines = new Set<ServedModel>();

  const serve = (model: NonNullable<InferenceTask['model']>): Promise<ServedModel> => {
    const key = model.baseModelDir ?? model.baseModel;
    let served = models.get(key);
    if (!served) {
      const unpin = artifacts.pin(key); // a loaded model's files stay on this host (ORT may map them)
      served = loads.during(model.baseModel, async () => {
        faultPointBlocking('inference-model-load');
        const kvMb = envNumber('HEARTH_KV_CACHE_MB') ?? 1024;
        const loaded = await loadModel(key, {
          device, lora: true, weightType, maxContext: envNumber('HEARTH_MAX_CONTEXT'), intraOpThreads: envNumber('HEARTH_INTRA_OP_THREADS'), log,
          // On a GPU, a model that cannot fit in its free memory is refused here, with the numbers.
          deviceMemory: await deviceMemoryOf(device), kvCacheBytes: kvMb * 2 ** 20,
        });
        const hearth = createEngineFromRuntime(loaded, {
          kvCacheBytes: kvMb * 2 ** 20,
          maxNumSeqs: envNumber('HEARTH_MAX_NUM_SEQS'),
          maxBatchedTokens: envNumber('HEARTH_MAX_BATCHED_TOKENS'),
          prefillChunkTokens: prefillChunkSetting(),
        });
        const o = hearth.engine.options;
        log(
          `inference engine ready: ${model.baseModel} on ${loaded.runner.device} (${weightType} weights, ${loaded.runner.attention} attention, context ${loaded.runner.maxPositions}, ` +
            `KV budget ${o.kvCacheTokens} tokens, max ${o.maxNumSeqs} sequences / ${o.maxBatchedTokens} tokens per step (${o.prefillChunkTokens === 'auto' ? 'prompt tokens in steps that decode sized from step times' : `${o.prefillChunkTokens} prompt tokens in steps that decode`}), loaded in ${Math.round(loaded.loadMs)} ms)`,
        );
        const ready = { name: model.baseModel, loaded, hearth };
        loadedEngines.add(ready);
        // A device fault fails the step's requests (503, naming the device: see device-fault.ts); then this model's
        // session is dropped so the next request loads a new one, or, the device being lost, the worker exits.
        loaded.runner.onDeviceFault = (fault) => {
          if (models.get(key) !== served) return;
          models.delete(key);
          loadedEngines.delete(ready);
          setImmediate(() => void loaded.runner.release().catch(() => {}));
          if (fault.kind === 'lost') {
            log(`${fault.message}: exiting (status ${EXIT_DEVICE_LOST}) for the supervisor to start a new worker`);
            // Let the failed requests' answers leave first.
            setTimeout(() => exit(EXIT_DEVICE_LOST), 500).unref();
          } else log(`${fault.message}: the session of ${model.baseModel} is released; the next request loads it anew`);
        };
        return ready;
      });
      models.set(key, served);
      served.catch(() => (models.delete(key), unpin())); // let a later request retry a failed load
    }
    return served;
  };

  /** The task's model with this host's paths: fetched from the API host first when this host lacks them. */
  const localModel = async (task: InferenceTask): Promise<NonNullable<InferenceTask['model']>> => {
    const model = task.model!;
    if (!task.home) return model;
    const api = { home: task.home, homeId: task.homeId };
    try {
      return {
        ...model,
        baseModelDir: model.baseModelDir && (await artifacts.localize(api, model.baseModelDir)),
        adapterDir: model.adapterDir && (await artifacts.localize(api, model.adapterDir)),
      };
    } catch (err) {
      log(`model ${model.name} is not available on this host: ${(err as Error).message}`);
      throw new TaskError(503, `model ${model.name} could not be fetched to the worker host: ${(err as Error).message}`);
    }
  };

  /** Run one request on this host's copy of its model. */
  const infer = async (task: InferenceTask, ctx: InferenceContext, model: NonNullable<InferenceTask['model']>): Promise<void> => {
    let served: ServedModel;
    try {
      served = await serve(model);
    } catch (err) {
      throw new TaskError(503, `model ${model.baseModel} could not be loaded: ${(err as Error).message}`);
    }
    if (task.op === 'calibrate') {
      const deviceKey = deviceKeyOf(await detectDevices(), served.loaded.runner.device);
      return ctx.emit({ type: 'result', data: { deviceKey, ...(await calibrate(served.hearth, served.loaded.config.vocabSize)) } });
    }
    return new Promise<void>((resolve, reject) => {
      let handle: InferenceHandle | null = null;
      const onAbort = () => {
        handle?.cancel();
        reject(new CancelledError());
      };
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      const settle = () => ctx.signal.removeEventListener('abort', onAbort);
      const onEvent = (e: InferenceEvent) => {
        ctx.emit(e); // as the adapter made it: the API reads the same event
        if (e.type !== 'chunk') (settle(), resolve());
      };
      void served.hearth
        // The API's route parsed the body with the same schema before it enqueued the task (InferenceTask.body).
        .submit({ kind: task.op as 'chat' | 'completion' | 'embedding' | 'chat_tokens', body: task.body, model: model.name, adapter: model.adapterDir, validated: true, entity: task.entity ?? null }, onEvent)
        .then((h) => {
          handle = h;
          if (ctx.signal.aborted) h.cancel();
        });
    });
  };

  return {
    async inference(task, ctx) {
      if (!['chat', 'completion', 'embedding', 'chat_tokens', 'calibrate'].includes(task.op)) throw new TaskError(400, `unknown inference op ${task.op}`);
      if (!task.model) throw new TaskError(404, 'no model given for this request');
      // This host's copies of the base model and adapter are pinned before they are localized, so that no process of
      // the host evicts them before they are loaded; a loaded base model keeps a pin of its own (serve).
      const api = task.home ? { home: task.home, homeId: task.homeId } : null;
      const used = [task.model.baseModelDir, task.model.adapterDir].filter((p): p is string => !!p);
      const pins = api ? used.map((p) => artifacts.pinFor(api, p)) : [];
      try {
        return await infer(task, ctx, await localModel(task));
      } finally {
        for (const unpin of pins) unpin();
      }
    },

    stats() {
      const batchSizeCounts: Record<string, number> = {};
      for (const served of loadedEngines) for (const [size, n] of served.hearth.engine.batchSizeCounts) batchSizeCounts[size] = (batchSizeCounts[size] ?? 0) + n;
      const prefillChunkTokens: Record<string, number> = {};
      for (const served of loadedEngines) prefillChunkTokens[served.name] = served.hearth.engine.lastMixedStepBudget;
      return { batchSizeCounts, prefillChunkTokens, loadedModels: [...loadedEngines].map((s) => s.name) };
    },

    async close() {
      for (const served of models.values()) {
        const m = await served.catch(() => null);
        await m?.loaded.runner.release();
      }
      models.clear();
    },
  };
}
