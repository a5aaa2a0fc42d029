// loadModel: a model folder (or a store id) → config, tokenizer, chat template and a ready runner.
import { servedContext } from './served-context.js';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ModelConfig } from './model-config.js';
import { openModelWeights } from './hf-model.js';
import { buildDecoderGraph, cacheHeadDim, defaultAttention, type AttentionKind, type WeightType } from './llama-graph.js';
import { cachedGraph, graphCacheKey } from './graph-cache.js';
import { createSession, executionProvidersFor, ModelRunner } from './runner.js';
import { KvOps } from './resident-kv.js';
import { parseDevice } from '../domain/device-name.js';
import { servesHalf } from './fast-half.js';
import { checkFitsDevice, modelMemoryNeed, type DeviceMemory } from './device-memory.js';
import { placementLine, placementOf, type Placement, type ProfileEvent } from './placement.js';
import { Tokenizer } from './tokenizer.js';
import { loadLoraAdapter, type LoraAdapter } from './lora.js';
import { chatTemplateFromConfig, type ChatMessage, type ChatTemplate, type RenderOptions } from './chat-template.js';

export interface LoadOptions {
  /** 'cpu' (default), 'cuda:N' or 'webgpu:0' (a provider that does not load falls back to CPU with a log line). */
  device?: string;
  /** HEARTH_HOME for resolving store ids (default env HEARTH_HOME or ./.hearth). */
  home?: string;
  /** Longest context to support (default: the model's, capped at 8192). */
  maxContext?: number;
  /** Attention form; default GroupQueryAttention when head_dim % 16 == 0, else standard ops. */
  attention?: AttentionKind;
  /** ONNX Runtime threads (default: defaultIntraOpThreads, i.e. one for very small models, else one per core). */
  intraOpThreads?: number;
  /** 'stored' (default): as the model's files hold them (GGUF blocks stay quantized); 'f32'; 'q4' = 4-bit re-quantized at load. */
  weightType?: WeightType;
  /** Preferred 4-bit block length (default 128; see q4.ts). */
  q4Block?: number;
  /** Build the graph with per-row LoRA inputs, so adapters can be served without merging. */
  lora?: boolean;
  /** Serve float16 weights at 16 bits (default: where the device has fast fp16 math, see fast-half.ts). */
  half?: boolean;
  /**
   * Keep the KV cache where the session computes between steps (resident-kv.ts; GroupQueryAttention graphs).
   * Default: on webgpu:0, the only device onnxruntime-node can leave outputs on. On the CPU it runs the same
   * logic over host tensors (for tests; the host cache is faster there).
   */
  residentKv?: boolean;
  /** The GPU's memory (from detection): a model that would not fit in its free memory is refused before loading. */
  deviceMemory?: DeviceMemory;
  /** The KV cache budget the engine will use (counted against deviceMemory). */
  kvCacheBytes?: number;
  log?: (line: string, level?: 'info' | 'warn') => void;
}

export interface LoadedModel {
  /** Store id (publisher/name) or the folder path. */
  id: string;
  dir: string;
  config: ModelConfig;
  tokenizer: Tokenizer;
  chatTemplate: ChatTemplate;
  /** generation_config.json contents ({} if absent): default temperature, top_p, … */
  generationConfig: Record<string, unknown>;
  runner: ModelRunner;
  /** Render a chat with the model's template (ChatML if it has none); encode with addSpecialTokens: false. */
  renderChat(messages: ChatMessage[], opts?: RenderOptions): string;
  /** Read a PEFT LoRA checkpoint folder for this model (requires loading with lora: true). */
  loadAdapter(dir: string): LoraAdapter;
  /** Time spent reading weights, building the graph and creating the session. */
  loadMs: number;
  /** Of loadMs: building the graph and repacking the weights (or finding the cached build). */
  graphMs: number;
  /** Of loadMs: ONNX Runtime's session creation (reading the graph, optimizing, pre-packing the weights). */
  sessionMs: number;
  /** Whether this load built the graph (false: the cached build beside the model was reused). */
  graphBuilt: boolean;
  /** Bytes of the built graph and its weights on disk. */
  graphBytes: number;
  /** On a GPU: which provider ran each node of the warm-up step (see placement.ts); undefined on the CPU. */
  placement?: Placement;
}

/**
 * One ONNX Runtime thread for very small models, one per core otherwise. Waking a second thread costs more
 * than it saves on tiny matrices: measured (2-core EPYC) on stories260K (64 × 172 MLP) 0.84 → 0.74 ms per
 * 8-row step alone, and 1.44 → 0.59 ms ITL at 8 concurrent when served; on the ~1M demo model (128 × 384)
 * 0.71 → 0.52 ms; on ~20M (384 × 1024) one thread is 1.4× slower at 8 rows.
 */
export function defaultIntraOpThreads(config: ModelConfig): number | undefined {
  return config.hiddenSize * config.intermediateSize < 2 ** 17 ? 1 : undefined;
}

export function hearthHome(): string {
  return process.env.HEARTH_HOME ?? '.hearth';
}

/** A folder path if it holds config.json, else HEARTH_HOME/models/<id>. */
export function resolveModelDir(dirOrId: string, home = hearthHome()): string {
  if (existsSync(join(dirOrId, 'config.json'))) return dirOrId;
  const inStore = join(home, 'models', dirOrId);
  if (existsSync(join(inStore, 'config.json'))) return inStore;
  throw new Error(`model "${dirOrId}" not found (neither a model folder nor in ${join(home, 'models')}); import it with: hearth models import <path>`);
}

const readJsonIf = (p: string): Record<string, any> => (existsSync(p) ? JSON.parse(readFileSync(p, 'utf8')) : {});

export function loadTokenizer(dir: string): Tokenizer {
  const tokenizerPath = join(dir, 'tokenizer.json');
  if (!existsSync(tokenizerPath)) throw new Error(`no tokenizer.json in ${dir}`);
  return new Tokenizer({ tokenizerJson: JSON.parse(readFileSync(tokenizerPath, 'utf8')), tokenizerConfig: readJsonIf(join(dir, 'tokenizer_config.json')) });
}

export async function loadModel(dirOrId: string, opts: LoadOptions = {}): Promise<LoadedModel> {
  const t0 = performance.now();
  const dir = resolveModelDir(dirOrId, opts.home);
  const tokenizer = loadTokenizer(dir);
  const tokenizerConfig = readJsonIf(join(dir, 'tokenizer_config.json'));
  const chatTemplate = chatTemplateFromConfig(tokenizerConfig);
  const generationConfig = readJsonIf(join(dir, 'generation_config.json'));
  const { config, source, files } = openModelWeights(dir);
  // The rule and its reasons: worker/runtime/served-context.ts (docs/configuration.md, HEARTH_MAX_CONTEXT).
  const served = servedContext(config.maxPositionEmbeddings, opts.maxContext, config.slidingWindow);
  const maxPositions = served.positions;
  if (served.note) opts.log?.(`${dirOrId}: ${served.note}`, served.beyondTrained ? 'warn' : 'info');
  const attention = opts.attention ?? defaultAttention(config, opts.device ?? 'cpu');
  const half = opts.half ?? servesHalf(opts.device ?? 'cpu');
  if (opts.deviceMemory && (opts.device ?? 'cpu') !== 'cpu') {
    const weightType = opts.weightType ?? 'stored';
    const fileBytes = files.reduce((sum, f) => sum + statSync(f).size, 0);
    const need = modelMemoryNeed({ config, weightType, fileBytes, gguf: files.some((f) => f.endsWith('.gguf')), half, kvCacheBytes: opts.kvCacheBytes ?? 0 });
    checkFitsDevice(dirOrId, opts.device!, need, opts.deviceMemory, weightType);
  }
  const residentKv = opts.residentKv ?? (opts.device ?? 'cpu').startsWith('webgpu');
  if (residentKv && attention !== 'gqa') throw new Error(`a resident KV cache needs GroupQueryAttention (attention "${attention}" asked)`);
  const graphOptions = { attention, maxPositions, lora: opts.lora ?? false, weightType: opts.weightType ?? 'stored', q4Block: opts.q4Block ?? null, half, residentKv };
  const tGraph = performance.now();
  const graph = cachedGraph(dir, graphCacheKey(files, graphOptions), (external) =>
    buildDecoderGraph(config, source, { ...graphOptions, lora: opts.lora, q4Block: opts.q4Block, external }));
  const tSession = performance.now();
  // On a GPU, the first run is profiled to say which nodes had no device kernel (unless the operator profiles).
  const profileDir = (opts.device ?? 'cpu') !== 'cpu' && !process.env.HEARTH_ORT_PROFILE ? mkdtempSync(join(tmpdir(), 'hearth-placement-')) : undefined;
  let created;
  try {
    const deviceOutputs = residentKv ? Array.from({ length: 2 * config.numLayers }, (_, j) => `present.${j >> 1}.${j & 1 ? 'value' : 'key'}`) : undefined;
    created = await createSession(graph.path, { device: opts.device, intraOpThreads: opts.intraOpThreads ?? defaultIntraOpThreads(config), log: opts.log, profileDir, deviceOutputs });
  } finally {
    if (process.env.HEARTH_GRAPH_CACHE === 'off') graph.discard();
  }
  const { session, device } = created;
  const kvOps = residentKv
    ? await KvOps.create(config.numLayers, config.numKvHeads, cacheHeadDim(config, attention), executionProvidersFor(parseDevice(device)), device.startsWith('webgpu'))
    : null;
  const runner = new ModelRunner(session, config, attention, maxPositions, device, opts.lora ?? false, kvOps);
  let placement: Placement | undefined;
  if (profileDir) {
    try {
      placement = await warmUpAndPlace(runner, profileDir);
      if (device !== 'cpu') opts.log?.(placementLine(device, placement));
    } finally {
      rmSync(profileDir, { recursive: true, force: true });
    }
  }
  return {
    id: dirOrId, dir, config, tokenizer, chatTemplate, generationConfig, runner,
    renderChat: (messages, o) => chatTemplate.render(messages, o),
    loadAdapter: (adapterDir) => {
      if (!opts.lora) throw new Error('load the model with lora: true to serve LoRA adapters');
      return loadLoraAdapter(adapterDir, config, attention);
    },
    loadMs: performance.now() - t0,
    graphMs: tSession - tGraph,
    sessionMs: performance.now() - tSession,
    graphBuilt: graph.built,
    graphBytes: graph.bytes,
    placement,
  };
}

/**
 * One single-token step (on a GPU it also compiles the first shaders), then the profile of it: which provider
 * ran each node. Profiling stops at endProfiling, so later steps are not slowed by it.
 */
async function warmUpAndPlace(runner: ModelRunner, profileDir: string): Promise<Placement> {
  const kv = runner.newSequence();
  await runner.forward([{ tokens: [0], kv }]);
  kv.dispose();
  await runner.session.endProfiling();
  const file = readdirSync(profileDir).find((f) => f.endsWith('.json'));
  if (!file) throw new Error(`ONNX Runtime wrote no profile in ${profileDir}`);
  return placementOf(JSON.parse(readFileSync(join(profileDir, file), 'utf8')) as ProfileEvent[]);
}
