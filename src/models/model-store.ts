// The model store under HEARTH_HOME/models/<publisher>/<name>/. Every entry is a Hugging Face
// style folder (config.json, tokenizer.json, tokenizer_config.json, generation_config.json) plus
// Hearth's manifest.json, with the weights as imported: safetensors (F32/F16/BF16) as they came, or a
// GGUF file kept whole as model.gguf, its tensors in their own quantization (nothing is dequantized at
// import; the runtime serves the blocks as they are). Imports are staged in a temp dir and renamed into
// place at the end, so a failed import never leaves a half-written model.
import { copyFileSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync, openSync, readSync, writeSync, closeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { ModelConfig } from '../runtime/model-config.js';
import { totalmem } from 'node:os';
import { openGguf } from '../runtime/gguf-model.js';
import { ggmlTypeName } from '../runtime/gguf-dequant.js';
import { GGUF_WEIGHTS_FILE, parseHfConfig, readJson, toHfConfig } from '../runtime/hf-model.js';
import { verifyWeights } from '../runtime/llama-graph.js';
import { listFolderTensors } from '../runtime/safetensors.js';
import { Tokenizer } from '../runtime/tokenizer.js';
import { chatTemplateFromConfig } from '../runtime/chat-template.js';

export interface ModelManifest {
  id: string;
  /** What was imported: a HF folder, a GGUF file, or a model Hearth generated. */
  format: 'hf' | 'gguf' | 'generated';
  source: string;
  architecture: string;
  parameters: number;
  /** Bytes of weight files in the store. */
  sizeBytes: number;
  /** How the weights are stored: the tensor types and how many tensors of each (e.g. {"Q4_K": 193, "Q6_K": 33, "F32": 65}). */
  tensorTypes?: Record<string, number>;
  /** The type most of the parameters are in (Q4_K, F16, …): what `hearth models list` shows. */
  quantization?: string;
  importedAt: string;
  config: ModelConfig;
}

/** How a model's weights are stored: a GGUF's main quantization, else the float type of its safetensors (from bytes per parameter). */
export function weightType(m: Pick<ModelManifest, 'quantization' | 'sizeBytes' | 'parameters'>): string {
  if (m.quantization) return m.quantization;
  return m.sizeBytes / Math.max(1, m.parameters) > 3 ? 'F32' : 'F16/BF16';
}

export type ImportProgress = (stage: string, done: number, total: number) => void;

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;

export function defaultHome(): string {
  return process.env.HEARTH_HOME ?? './.hearth';
}

export function modelsRoot(home: string): string {
  return join(home, 'models');
}

export function validateModelId(id: string): void {
  if (!ID_PATTERN.test(id)) throw new Error(`invalid model id "${id}": use publisher/name (letters, digits, . _ -)`);
}

export function modelDir(home: string, id: string): string {
  validateModelId(id);
  return join(modelsRoot(home), id);
}

const countParams = (shapes: Iterable<{ shape: number[] }>) => [...shapes].reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0);

/** A model id derived from the source path: local/<folder or file name>. */
export function defaultModelId(source: string): string {
  const name = basename(source.replace(/\/+$/, '')).replace(/\.gguf$/i, '').replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[^A-Za-z0-9]+/, '');
  return `local/${name || 'model'}`;
}

/** Stage into a temp dir under the store, then rename into place. */
async function staged(home: string, id: string, fill: (tmp: string) => Promise<ModelManifest>): Promise<ModelManifest> {
  const finalDir = modelDir(home, id);
  if (existsSync(finalDir)) throw new Error(`model ${id} already exists in ${modelsRoot(home)} (remove it first: hearth models rm ${id})`);
  mkdirSync(modelsRoot(home), { recursive: true });
  const tmp = join(modelsRoot(home), `.import-${randomBytes(6).toString('hex')}`);
  mkdirSync(tmp);
  try {
    const manifest = await fill(tmp);
    writeFileSync(join(tmp, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
    mkdirSync(dirname(finalDir), { recursive: true });
    renameSync(tmp, finalDir);
    return manifest;
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}

/** Copy a file in 16 MB chunks, reporting progress. */
function copyWithProgress(src: string, dst: string, onBytes: (n: number) => void): void {
  const size = statSync(src).size;
  if (size < 64 << 20) { copyFileSync(src, dst); onBytes(size); return; }
  const buf = Buffer.alloc(16 << 20);
  const inFd = openSync(src, 'r'), outFd = openSync(dst, 'w');
  try {
    for (let pos = 0; pos < size; ) {
      const n = readSync(inFd, buf, 0, buf.length, pos);
      writeSync(outFd, buf, 0, n);
      pos += n;
      onBytes(n);
    }
  } finally {
    closeSync(inFd); closeSync(outFd);
  }
}

/** Check tokenizer files load and the chat template parses; throws naming the problem. */
function checkTokenizer(tokenizerJson: Record<string, any>, tokenizerConfig: Record<string, any>): void {
  try {
    new Tokenizer({ tokenizerJson, tokenizerConfig });
  } catch (err) {
    throw new Error(`unusable tokenizer: ${(err as Error).message}`);
  }
  try {
    chatTemplateFromConfig(tokenizerConfig);
  } catch (err) {
    throw new Error(`unusable chat template: ${(err as Error).message}`);
  }
}

export async function importHfFolder(home: string, source: string, id: string, progress?: ImportProgress): Promise<ModelManifest> {
  if (!existsSync(join(source, 'config.json'))) throw new Error(`${source} has no config.json (not a Hugging Face model folder)`);
  if (!existsSync(join(source, 'tokenizer.json'))) throw new Error(`${source} has no tokenizer.json`);
  const entries = listFolderTensors(source);
  for (const e of entries) if (!['F32', 'F16', 'BF16'].includes(e.dtype)) throw new Error(`unsupported tensor type ${e.dtype} for ${e.name} (supported: F32, F16, BF16)`);
  const generation = existsSync(join(source, 'generation_config.json')) ? readJson(join(source, 'generation_config.json')) : null;
  const config = parseHfConfig(readJson(join(source, 'config.json')), generation, new Set(entries.map((e) => e.name)));
  const shapes = new Map(entries.map((e) => [e.name, { shape: e.shape }]));
  verifyWeights(config, shapes);
  const tokenizerConfig = existsSync(join(source, 'tokenizer_config.json')) ? readJson(join(source, 'tokenizer_config.json')) : {};
  checkTokenizer(readJson(join(source, 'tokenizer.json')), tokenizerConfig);

  const weightFiles = [...new Set(entries.map((e) => basename(e.file)))];
  if (existsSync(join(source, 'model.safetensors.index.json'))) weightFiles.push('model.safetensors.index.json');
  const extra = ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'generation_config.json', 'special_tokens_map.json'].filter((f) => existsSync(join(source, f)));
  const files = [...weightFiles, ...extra];
  const total = files.reduce((a, f) => a + statSync(join(source, f)).size, 0);
  return staged(home, id, async (tmp) => {
    let done = 0;
    for (const f of files) copyWithProgress(join(source, f), join(tmp, f), (n) => progress?.('copy', (done += n), total));
    return {
      id, format: 'hf', source, architecture: config.architecture, parameters: countParams(shapes.values()),
      sizeBytes: weightFiles.reduce((a, f) => a + statSync(join(source, f)).size, 0), importedAt: new Date().toISOString(), config,
    };
  });
}

/**
 * Bytes a model's weights take when served as stored: block formats as MatMulNBits blocks with float
 * scales (and offsets for formats with minimums), 5–8 bits a weight where the file has 4.5–6.6; float
 * tensors widened to float32 on a CPU. An estimate for the memory check, within ~10%.
 */
export function servedBytesEstimate(tensors: { type: number; elements: number }[]): number {
  const bitsPerWeight: Record<number, number> = { 0: 32, 1: 32, 30: 32, 2: 5, 3: 6, 6: 9, 7: 10, 8: 9, 12: 6, 13: 10, 14: 10 };
  return tensors.reduce((a, t) => a + (t.elements * (bitsPerWeight[t.type] ?? 32)) / 8, 0);
}

export async function importGguf(home: string, source: string, id: string, progress?: ImportProgress, opts: { ignoreMemory?: boolean } = {}): Promise<ModelManifest> {
  const model = openGguf(source);
  verifyWeights(model.config, model.source);
  checkTokenizer(model.tokenizerJson, model.tokenizerConfig);
  const tensors = model.file.tensors.map((t) => ({ type: t.type, elements: t.dims.reduce((a, b) => a * b, 1) }));
  const served = servedBytesEstimate(tensors);
  if (!opts.ignoreMemory && served > totalmem())
    throw new Error(`${source} needs about ${(served / 2 ** 30).toFixed(1)} GiB of memory to serve, more than this machine's ${(totalmem() / 2 ** 30).toFixed(1)} GiB; nothing was imported (import anyway with --ignore-memory, e.g. for workers on bigger hosts)`);
  const tensorTypes: Record<string, number> = {};
  const paramsByType = new Map<string, number>();
  for (const t of tensors) {
    const name = ggmlTypeName(t.type);
    tensorTypes[name] = (tensorTypes[name] ?? 0) + 1;
    paramsByType.set(name, (paramsByType.get(name) ?? 0) + t.elements);
  }
  const quantization = [...paramsByType].sort((a, b) => b[1] - a[1])[0][0];
  return staged(home, id, async (tmp) => {
    const total = statSync(source).size;
    let done = 0;
    copyWithProgress(source, join(tmp, GGUF_WEIGHTS_FILE), (n) => progress?.('copy', (done += n), total));
    writeFileSync(join(tmp, 'config.json'), JSON.stringify(toHfConfig(model.config), null, 2) + '\n');
    writeFileSync(join(tmp, 'generation_config.json'), JSON.stringify({ bos_token_id: model.config.bosTokenId, eos_token_id: model.config.eosTokenIds }, null, 2) + '\n');
    writeFileSync(join(tmp, 'tokenizer.json'), JSON.stringify(model.tokenizerJson));
    writeFileSync(join(tmp, 'tokenizer_config.json'), JSON.stringify(model.tokenizerConfig, null, 2) + '\n');
    return {
      id, format: 'gguf', source, architecture: model.config.architecture, parameters: tensors.reduce((a, t) => a + t.elements, 0),
      sizeBytes: total, tensorTypes, quantization, importedAt: new Date().toISOString(), config: model.config,
    };
  });
}

/** Import a HF folder or a .gguf file into the store. */
export async function importModel(home: string, source: string, opts: { id?: string; progress?: ImportProgress; ignoreMemory?: boolean } = {}): Promise<ModelManifest> {
  if (!existsSync(source)) throw new Error(`${source} does not exist`);
  const id = opts.id ?? defaultModelId(source);
  validateModelId(id);
  if (statSync(source).isDirectory()) return importHfFolder(home, source, id, opts.progress);
  return importGguf(home, source, id, opts.progress, { ignoreMemory: opts.ignoreMemory });
}

/**
 * Add a folder that Hearth itself wrote (e.g. the generated demo model) to the store by moving it
 * into place. The folder must be complete; it is validated like an import.
 */
export function adoptGeneratedFolder(home: string, folder: string, id: string, source: string): ModelManifest {
  const finalDir = modelDir(home, id);
  if (existsSync(finalDir)) throw new Error(`model ${id} already exists`);
  const entries = listFolderTensors(folder);
  const config = parseHfConfig(readJson(join(folder, 'config.json')), null, new Set(entries.map((e) => e.name)));
  const shapes = new Map(entries.map((e) => [e.name, { shape: e.shape }]));
  verifyWeights(config, shapes);
  const manifest: ModelManifest = {
    id, format: 'generated', source, architecture: config.architecture, parameters: countParams(shapes.values()),
    sizeBytes: entries.reduce((a, e) => a + e.end - e.begin, 0), importedAt: new Date().toISOString(), config,
  };
  writeFileSync(join(folder, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  mkdirSync(dirname(finalDir), { recursive: true });
  renameSync(folder, finalDir);
  return manifest;
}

export function listModels(home: string): ModelManifest[] {
  const root = modelsRoot(home);
  if (!existsSync(root)) return [];
  const out: ModelManifest[] = [];
  for (const publisher of readdirSync(root)) {
    if (publisher.startsWith('.')) continue;
    const pdir = join(root, publisher);
    if (!statSync(pdir).isDirectory()) continue;
    for (const name of readdirSync(pdir)) {
      const m = join(pdir, name, 'manifest.json');
      if (existsSync(m)) out.push(readJson(m) as ModelManifest);
    }
  }
  return out.sort((a, b) => a.id.localeCompare(b.id));
}

export function getModel(home: string, id: string): ModelManifest | null {
  const m = join(modelDir(home, id), 'manifest.json');
  return existsSync(m) ? (readJson(m) as ModelManifest) : null;
}

export function removeModel(home: string, id: string): void {
  const dir = modelDir(home, id);
  if (!existsSync(join(dir, 'manifest.json'))) throw new Error(`model ${id} is not in the store (${modelsRoot(home)})`);
  // Rename first so a concurrent reader never sees a half-deleted folder.
  const trash = join(modelsRoot(home), `.rm-${randomBytes(6).toString('hex')}`);
  renameSync(dir, trash);
  rmSync(trash, { recursive: true, force: true });
  const parent = dirname(dir);
  if (readdirSync(parent).length === 0) rmSync(parent, { recursive: true, force: true });
}
