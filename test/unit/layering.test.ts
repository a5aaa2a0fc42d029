// The floors of the house (docs/architecture.md): the CLI and scripts on top; the API side (routes → services →
// queue → store) and the worker side (host → engines → artifacts) beside each other below it, neither importing
// the other; under both, the library they share (protocol, runtime, hardware, domain). Each file imports only
// from its own floor or the floors below, and only within its side or into the library. A pure rule that a
// refactor can break without any other test noticing, hence this scan of every import in src/, worker/ and
// scripts/, static, dynamic, and any relative path to a module written as a string (a string-built import).
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

type Side = 'top' | 'api' | 'worker' | 'library';
interface Floor {
  side: Side;
  floor: number;
}

/**
 * Every part of the house, by the path of a folder or a file relative to the repository (the longest match
 * wins). Higher floors may import lower ones; a side may import itself and the library; the library only itself.
 */
const PARTS: Record<string, Floor> = {
  scripts: { side: 'top', floor: 9 },
  'src/cli': { side: 'top', floor: 9 },

  'src/api': { side: 'api', floor: 8 },
  'src/console': { side: 'api', floor: 8 }, // the web console the API serves
  'src/services': { side: 'api', floor: 7 },
  'src/queue': { side: 'api', floor: 6 }, // transports to workers; reads job state from the store
  'src/store': { side: 'api', floor: 5 }, // SQLite
  'src/schemas': { side: 'api', floor: 4 }, // the HTTP routes' request and response schemas
  'src/models': { side: 'api', floor: 4 }, // installed models: the store of their folders, the demo model
  'src/tables': { side: 'api', floor: 4 },
  'src/weave-objects': { side: 'api', floor: 4 },
  'src/metrics': { side: 'api', floor: 4 },

  // The worker process: its host and transports, then the engines, then what the engines share.
  'worker/host.ts': { side: 'worker', floor: 8 },
  'worker/transport-ipc.ts': { side: 'worker', floor: 8 },
  'worker/transport-bullmq.ts': { side: 'worker', floor: 8 },
  'worker/default-handlers.ts': { side: 'worker', floor: 8 }, // loads the engines by name
  'worker/inference': { side: 'worker', floor: 7 },
  'worker/training': { side: 'worker', floor: 7 },
  'worker/handlers.ts': { side: 'worker', floor: 6 },
  'worker/model-loads.ts': { side: 'worker', floor: 6 },
  'worker/job-locks.ts': { side: 'worker', floor: 6 },
  'worker/pulse.ts': { side: 'worker', floor: 6 }, // the heartbeat thread: its starter and its body
  'worker/pulse-thread.ts': { side: 'worker', floor: 6 },
  'worker/artifacts': { side: 'worker', floor: 6 },

  // The library both sides stand on.
  'src/synthetic-models': { side: 'library', floor: 3 }, // model files generated for the demo, tests and benchmarks
  'src/runtime': { side: 'library', floor: 2 }, // model files, tokenizer, graph builder, ORT runner, devices
  'src/hardware': { side: 'library', floor: 2 }, // device detection and prices
  'src/protocol': { side: 'library', floor: 1 }, // what crosses between the API and workers
  'src/domain': { side: 'library', floor: 0 },
  'src/errors': { side: 'library', floor: 0 },
  'src/config': { side: 'library', floor: 0 },
};

/** The part `rel` (a repository-relative path) lies in: the longest key of PARTS that is it or a folder above it. */
export function partOf(rel: string): string | null {
  let best: string | null = null;
  for (const key of Object.keys(PARTS)) {
    if ((rel === key || rel.startsWith(key + '/')) && (!best || key.length > best.length)) best = key;
  }
  return best;
}

/** Relative module references of a source file: static and dynamic imports, and every string literal that is a
 * relative path to a module (`'../x/y.js'`), so an import whose specifier is built from a string is seen too. */
export function relativeReferences(source: string): string[] {
  const found = new Set(ts.preProcessFile(source, true, true).importedFiles.map((f) => f.fileName).filter((n) => n.startsWith('.')));
  const sf = ts.createSourceFile('x.ts', source, ts.ScriptTarget.Latest, false, ts.ScriptKind.TSX);
  const visit = (n: ts.Node): void => {
    if ((ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n)) && /^\.{1,2}\/.*\.(m?[jt]sx?)$/.test(n.text)) found.add(n.text);
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return [...found];
}

interface Violation {
  file: string;
  imports: string;
  why: string;
}

/** Imports that go up a floor or sideways between the API and the workers, and files on no floor. */
export function floorViolations(files: { file: string; source: string }[]): Violation[] {
  const out: Violation[] = [];
  for (const { file, source } of files) {
    const rel = path.relative(ROOT, file);
    const from = partOf(rel);
    if (from === null) {
      out.push({ file: rel, imports: '', why: `${rel} is on no floor: add its folder to PARTS` });
      continue;
    }
    for (const spec of relativeReferences(source)) {
      const target = path.relative(ROOT, path.resolve(path.dirname(file), spec));
      const to = partOf(target);
      if (to === null || to === from) continue; // outside the house (models/, bin/, packages) or the same part
      const a = PARTS[from];
      const b = PARTS[to];
      if (b.floor > a.floor) out.push({ file: rel, imports: spec, why: `${from} (floor ${a.floor}) imports ${to} (floor ${b.floor}), a higher floor` });
      else if (a.side !== 'top' && b.side !== 'library' && a.side !== b.side) {
        out.push({ file: rel, imports: spec, why: `${from} (${a.side} side) imports ${to} (${b.side} side): the two sides meet only in the library` });
      }
    }
  }
  return out;
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|tsx|mts)$/.test(e.name) && !e.name.endsWith('.d.ts'))
    .map((e) => path.join(e.parentPath, e.name))
    .filter((f) => !f.includes(`${path.sep}node_modules${path.sep}`));
}

describe('layering of src/, worker/ and scripts/', () => {
  const at = (rel: string) => path.join(ROOT, rel);

  it('finds imports that go up a floor, static, dynamic or string-built, and files on no floor', () => {
    const found = floorViolations([
      { file: at('src/queue/scheduler.ts'), source: "import type { X } from '../services/training-jobs.js';\nimport { y } from './port.js';" },
      { file: at('src/store/x.ts'), source: "const m = await import('../api/app.js');" },
      { file: at('src/domain/x.ts'), source: "const name = '../runtime/runner.js'; const m = await import(name);" },
      { file: at('src/runtime/ok.ts'), source: "import { d } from '../domain/json-depth.js';\nimport { p } from '../protocol/messages.js';" },
      { file: at('src/api/ok.ts'), source: "export { z } from '../console/bundle.js';\nimport { m } from '../../models/recipe.json';" },
      { file: at('src/newfolder/x.ts'), source: '' },
    ]);
    expect(found.map((v) => `${v.file} → ${v.imports}`)).toEqual([
      'src/queue/scheduler.ts → ../services/training-jobs.js',
      'src/store/x.ts → ../api/app.js',
      'src/domain/x.ts → ../runtime/runner.js',
      'src/newfolder/x.ts → ',
    ]);
  });

  it('finds imports sideways between the API and the workers, either way, and from the library into either', () => {
    const found = floorViolations([
      { file: at('src/services/x.ts'), source: "import { s } from '../../worker/training/optimizer.js';" },
      { file: at('src/services/y.ts'), source: "const engine = path.resolve(here, '../../worker/training/worker-handler.ts');" },
      { file: at('worker/inference/x.ts'), source: "import { q } from '../../src/queue/port.js';" },
      { file: at('worker/artifacts/x.ts'), source: "import type { R } from '../../src/store/records.js';" },
      { file: at('src/protocol/x.ts'), source: "import { l } from '../../worker/training/losses.js';" },
      { file: at('worker/inference/ok.ts'), source: "import { m } from '../../src/protocol/messages.js';\nimport { r } from '../../src/runtime/runner.js';" },
      { file: at('src/cli/ok.ts'), source: "import { h } from '../../worker/host.js';\nimport { a } from '../api/app.js';" },
      { file: at('scripts/ok.ts'), source: "import { e } from '../worker/inference/engine.js';\nimport { s } from '../src/services/models.js';" },
    ]);
    expect(found.map((v) => `${v.file} → ${v.imports}`)).toEqual([
      'src/services/x.ts → ../../worker/training/optimizer.js',
      'src/services/y.ts → ../../worker/training/worker-handler.ts',
      'worker/inference/x.ts → ../../src/queue/port.js',
      'worker/artifacts/x.ts → ../../src/store/records.js',
      'src/protocol/x.ts → ../../worker/training/losses.js',
    ]);
  });

  it('no file in src/, worker/ or scripts/ imports up a floor or across from the other side', () => {
    const files = ['src', 'worker', 'scripts']
      .flatMap((d) => sourceFiles(at(d)))
      .filter((f) => !f.startsWith(at('src/console/web') + path.sep)) // the browser app, bundled on its own
      .map((file) => ({ file, source: fs.readFileSync(file, 'utf8') }));
    expect(files.length).toBeGreaterThan(250);
    expect(floorViolations(files)).toEqual([]);
  });
});
