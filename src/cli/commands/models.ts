// `hearth models import|list|rm|export-onnx`: the model store from the command line.
import { copyFileSync, existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeHomePrivate } from '../../config/private-home.js';
import { defaultHome, importModel, listModels, modelDir, removeModel, getModel, weightType } from '../../models/model-store.js';
import { readModelWeights } from '../../runtime/hf-model.js';
import { buildDecoderGraph, defaultAttention, type AttentionKind } from '../../runtime/llama-graph.js';

const USAGE = `usage:
  hearth models import <hf-folder | file.gguf> [--id publisher/name] [--ignore-memory]
  hearth models list [--json]
  hearth models rm <publisher/name>
  hearth models export-onnx <publisher/name> <out-dir> [--attention gqa|onnx23|standard] [--max-context N]`;

/** Split argv into positionals and --flag value / --flag=value / boolean --flag. */
export function parseArgs(argv: string[], booleans: string[] = []): { positional: string[]; flags: Record<string, string | true> } {
  const positional: string[] = [];
  const flags: Record<string, string | true> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) { positional.push(a); continue; }
    const eq = a.indexOf('=');
    if (eq > 0) { flags[a.slice(2, eq)] = a.slice(eq + 1); continue; }
    const name = a.slice(2);
    if (booleans.includes(name) || i + 1 >= argv.length) flags[name] = true;
    else flags[name] = argv[++i];
  }
  return { positional, flags };
}

function formatBytes(n: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

function formatParams(n: number): string {
  return n >= 1e9 ? `${(n / 1e9).toFixed(2)}B` : n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : `${(n / 1e3).toFixed(1)}K`;
}

/** A progress bar on stderr (redrawn in place on a terminal, a few lines otherwise); silent for small files. */
function progressBar(minBytes = 32 << 20): (stage: string, done: number, total: number) => void {
  let lastPct = -1;
  let lastStage = '';
  return (stage, done, total) => {
    if (total < minBytes) return;
    const pct = Math.floor((done / total) * 100);
    if (pct === lastPct && stage === lastStage) return;
    const tty = process.stderr.isTTY;
    if (!tty && pct % 10 !== 0 && pct !== 100) return;
    lastPct = pct; lastStage = stage;
    const width = 30, filled = Math.round((pct / 100) * width);
    const line = `${stage.padEnd(5)} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${String(pct).padStart(3)}% ${formatBytes(done)} / ${formatBytes(total)}`;
    process.stderr.write(tty ? `\r${line}${done >= total ? '\n' : ''}` : `${line}\n`);
  };
}

/** Bytes of the built graphs kept beside a model (see src/runtime/graph-cache.ts). */
function cacheBytes(dir: string): number {
  const root = join(dir, '.cache');
  if (!existsSync(root)) return 0;
  let total = 0;
  for (const build of readdirSync(root)) for (const f of readdirSync(join(root, build))) total += statSync(join(root, build, f)).size;
  return total;
}


export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const home = defaultHome();
  try {
    switch (sub) {
      case 'import': {
        makeHomePrivate(home);
        const { positional, flags } = parseArgs(rest, ['ignore-memory']);
        if (positional.length !== 1) { process.stderr.write(`${USAGE}\n`); return 2; }
        const id = typeof flags.id === 'string' ? flags.id : undefined;
        const m = await importModel(home, positional[0], { id, progress: progressBar(), ignoreMemory: flags['ignore-memory'] === true });
        process.stdout.write(`imported ${m.id} (${m.architecture}, ${formatParams(m.parameters)} parameters, ${m.quantization ?? 'float'}, ${formatBytes(m.sizeBytes)}) into ${modelDir(home, m.id)}\n`);
        return 0;
      }
      case 'list': {
        const { flags } = parseArgs(rest, ['json']);
        const models = listModels(home);
        if (flags.json) { process.stdout.write(JSON.stringify(models, null, 2) + '\n'); return 0; }
        if (models.length === 0) { process.stdout.write(`no models in ${join(home, 'models')}\n`); return 0; }
        const rows = models.map((m) => [m.id, m.architecture, formatParams(m.parameters), weightType(m), formatBytes(m.sizeBytes), formatBytes(cacheBytes(modelDir(home, m.id))), m.format, m.importedAt.slice(0, 19)]);
        const header = ['ID', 'ARCH', 'PARAMS', 'QUANT', 'SIZE', 'CACHE', 'FROM', 'IMPORTED'];
        const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
        for (const r of [header, ...rows]) process.stdout.write(r.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd() + '\n');
        return 0;
      }
      case 'rm': {
        if (rest.length !== 1) { process.stderr.write(`${USAGE}\n`); return 2; }
        removeModel(home, rest[0]);
        process.stdout.write(`removed ${rest[0]}\n`);
        return 0;
      }
      case 'export-onnx': {
        const { positional, flags } = parseArgs(rest);
        if (positional.length !== 2) { process.stderr.write(`${USAGE}\n`); return 2; }
        const [id, out] = positional;
        if (!getModel(home, id)) throw new Error(`model ${id} is not in the store (${join(home, 'models')})`);
        const dir = modelDir(home, id);
        const { config, weights } = readModelWeights(dir);
        const attention = (flags.attention as AttentionKind | undefined) ?? defaultAttention(config);
        if (!['gqa', 'standard', 'onnx23'].includes(attention)) throw new Error('--attention must be gqa, standard (opset 17, widest compatibility) or onnx23');
        const maxPositions = flags['max-context'] ? Number(flags['max-context']) : Math.min(config.maxPositionEmbeddings, 8192);
        const bytes = buildDecoderGraph(config, weights, { attention, maxPositions, forExport: true });
        // transformers.js / Optimum folder layout: config + tokenizer files beside onnx/model.onnx.
        mkdirSync(join(out, 'onnx'), { recursive: true });
        writeFileSync(join(out, 'onnx', 'model.onnx'), bytes);
        for (const f of ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json'])
          if (existsSync(join(dir, f))) copyFileSync(join(dir, f), join(out, f));
        process.stdout.write(`wrote ${join(out, 'onnx', 'model.onnx')} (${formatBytes(bytes.length)}, ${attention} attention, ${maxPositions} positions)\n`);
        return 0;
      }
      default:
        process.stderr.write(`${USAGE}\n`);
        return 2;
    }
  } catch (err) {
    process.stderr.write(`hearth models ${sub}: ${(err as Error).message}\n`);
    return 1;
  }
}
