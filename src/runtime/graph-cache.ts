// The built decoder graph of a model, kept on disk beside it: model.onnx (small) and weights.bin (its
// initializers as ONNX external data, read or memory-mapped by ONNX Runtime). Building is the slow part
// of a load (reading the weights, repacking blocks, transposing float matrices); the second load of the
// same model with the same options opens the cached files directly.
//
// Where: <model dir>/.cache/onnx-<key>/, or under the OS temp dir when the model folder is read-only.
// The key covers the build options, the weight files (name, size, mtime) and the graph builder's own
// source, so a change to any of them builds anew. HEARTH_GRAPH_CACHE=off builds into a temp folder that
// is deleted once the session is made (disk stays at the model's own size).
import { createHash, randomBytes } from 'node:crypto';
import { accessSync, constants, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ExternalData } from './onnx-proto.js';

/** The modules whose code decides the graph's bytes (test/unit/graph-cache-modules.test.ts checks the builder reaches no other). */
export const BUILDER_MODULES = [
  'llama-graph', 'decoder-options', 'decoder-weights', 'decoder-body', 'decoder-attention', 'decoder-attention-shared',
  'decoder-packed-rows', 'decoder-linear', 'decoder-quantized', 'nbits-product', 'decoder-embedding', 'decoder-lora', 'decoder-mlp',
  'gguf-repack', 'onnx-proto', 'q4', 'rope', 'gguf-model', 'gguf-dequant', 'half', 'weight-source', 'graph-cache',
];

let builderDigest: string | undefined;
function builderSourceDigest(): string {
  if (builderDigest) return builderDigest;
  const here = dirname(fileURLToPath(import.meta.url));
  const h = createHash('sha256');
  for (const m of BUILDER_MODULES) {
    const file = [join(here, `${m}.ts`), join(here, `${m}.js`)].find((f) => existsSync(f));
    h.update(file ? readFileSync(file) : m);
  }
  return (builderDigest = h.digest('hex'));
}

/** A key for one build: the builder's code, the options, and the weight files (path, size, mtime). */
export function graphCacheKey(weightFiles: string[], options: Record<string, unknown>): string {
  const h = createHash('sha256').update(builderSourceDigest()).update(JSON.stringify(options));
  for (const f of weightFiles) {
    const st = statSync(f);
    h.update(`${f}:${st.size}:${st.mtimeMs}`);
  }
  return h.digest('hex').slice(0, 16);
}

function writable(dir: string): boolean {
  try { accessSync(dir, constants.W_OK); return true; } catch { return false; }
}

export interface CachedGraph {
  /** model.onnx: give this path to ONNX Runtime. */
  path: string;
  /** Whether this load built it (false: reused). */
  built: boolean;
  /** Bytes of the graph and its weights on disk. */
  bytes: number;
  /** Remove the files (HEARTH_GRAPH_CACHE=off, after the session is made). */
  discard(): void;
}

/**
 * The cached graph for `key`, building it with `build` (which writes initializers through the given
 * ExternalData and returns the graph's bytes) when absent. Concurrent builders of one key (two workers
 * loading one model) each build into a private folder; the first rename wins, the other is dropped.
 */
export function cachedGraph(dir: string, key: string, build: (external: ExternalData) => Uint8Array, env = process.env): CachedGraph {
  const keep = env.HEARTH_GRAPH_CACHE !== 'off';
  const root = writable(dir) ? join(dir, '.cache') : join(tmpdir(), 'hearth-graph-cache', createHash('sha256').update(dir).digest('hex').slice(0, 16));
  const final = join(root, `onnx-${key}`);
  const sizeOf = (d: string) => readdirSync(d).reduce((a, f) => a + statSync(join(d, f)).size, 0);
  if (keep && existsSync(join(final, 'model.onnx'))) {
    const now = new Date();
    utimesSync(final, now, now); // most recently used first, for pruning
    return { path: join(final, 'model.onnx'), built: false, bytes: sizeOf(final), discard: () => rmSync(final, { recursive: true, force: true }) };
  }
  mkdirSync(root, { recursive: true });
  const tmp = join(root, `.build-${randomBytes(6).toString('hex')}`);
  mkdirSync(tmp);
  try {
    const external = new ExternalData(join(tmp, 'weights.bin'), 'weights.bin');
    let graph: Uint8Array;
    try { graph = build(external); } finally { external.close(); }
    writeFileSync(join(tmp, 'model.onnx'), graph);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  if (!keep) return { path: join(tmp, 'model.onnx'), built: true, bytes: sizeOf(tmp), discard: () => rmSync(tmp, { recursive: true, force: true }) };
  try {
    renameSync(tmp, final);
  } catch {
    rmSync(tmp, { recursive: true, force: true }); // another loader finished first: use its files
  }
  prune(root);
  return { path: join(final, 'model.onnx'), built: true, bytes: sizeOf(final), discard: () => rmSync(final, { recursive: true, force: true }) };
}

/**
 * Keep the KEEP most recently used builds of a model (an inference worker's LoRA-capable graph and a plain
 * one, say); older ones (other options, older code) go. A process still reading a removed build keeps
 * its open files.
 */
const KEEP = 2;
function prune(root: string): void {
  const builds = readdirSync(root).filter((f) => f.startsWith('onnx-')).map((f) => ({ f, t: statSync(join(root, f)).mtimeMs })).sort((a, b) => b.t - a.t);
  for (const { f } of builds.slice(KEEP)) rmSync(join(root, f), { recursive: true, force: true });
}
