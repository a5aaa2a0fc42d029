// The floors of src/ (docs/architecture.md): each folder imports only from its own floor or the floors below,
// so the code reads cli → api → services → queue → store → domain with no arrow back up. A pure rule that a
// refactor can break without any other test noticing, hence this scan of every import in src/.
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(import.meta.dirname, '../../src');

/** Higher floors may import lower ones, never the reverse. Every folder of src/ must be on a floor. */
const FLOORS: Record<string, number> = {
  cli: 5,
  api: 4,
  console: 4, // the web console the API serves
  services: 3,
  queue: 2, // transports to workers; reads job state from the store
  store: 1, // SQLite
  // Domain: pure logic and the types and files it works on, below every service and port.
  domain: 0,
  errors: 0,
  config: 0,
  metrics: 0,
  schemas: 0,
  hardware: 0,
  models: 0,
  tables: 0,
  'weave-objects': 0,
  artifacts: 0, // manifests of the files worker hosts fetch (sha256, safe paths)
};

/** The top folder of src/ that `file` lies in, or null outside src/ (worker/, packages). */
function topFolder(file: string): string | null {
  const rel = path.relative(SRC, file);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return null;
  const parts = rel.split(path.sep);
  return parts.length > 1 ? parts[0] : null;
}

/** Relative module specifiers of a source file, static and dynamic (TypeScript's own pre-parser). */
function relativeImports(source: string): string[] {
  return ts
    .preProcessFile(source, true, true)
    .importedFiles.map((f) => f.fileName)
    .filter((name) => name.startsWith('.'));
}

interface Violation {
  file: string;
  imports: string;
  why: string;
}

/** Imports from a lower floor up to a higher one, and folders with no floor. Paths relative to src/. */
export function floorViolations(files: { file: string; source: string }[]): Violation[] {
  const out: Violation[] = [];
  for (const { file, source } of files) {
    const from = topFolder(file);
    if (from === null) continue;
    if (!(from in FLOORS)) {
      out.push({ file: path.relative(SRC, file), imports: '', why: `src/${from} is on no floor: add it to FLOORS` });
      continue;
    }
    for (const spec of relativeImports(source)) {
      const to = topFolder(path.resolve(path.dirname(file), spec));
      if (to === null || to === from) continue;
      if (!(to in FLOORS)) continue; // reported when that folder's own files are scanned
      if (FLOORS[to] > FLOORS[from]) {
        out.push({ file: path.relative(SRC, file), imports: spec, why: `${from} (floor ${FLOORS[from]}) imports ${to} (floor ${FLOORS[to]})` });
      }
    }
  }
  return out;
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|tsx|mts)$/.test(e.name) && !e.name.endsWith('.d.ts'))
    .map((e) => path.join(e.parentPath, e.name));
}

describe('layering of src/', () => {
  it('finds an import from a lower floor to a higher one, static or dynamic, and a folder on no floor', () => {
    const at = (rel: string) => path.join(SRC, rel);
    const found = floorViolations([
      { file: at('queue/scheduler.ts'), source: "import type { X } from '../services/training-jobs.js';\nimport { y } from './port.js';" },
      { file: at('store/x.ts'), source: "const m = await import('../api/app.js');" },
      { file: at('services/ok.ts'), source: "import { q } from '../queue/port.js';\nimport { d } from '../domain/json-depth.js';\nimport { w } from '../../worker/runtime/x.js';" },
      { file: at('api/ok.ts'), source: "export { z } from '../console/bundle.js';" },
      { file: at('newfolder/x.ts'), source: '' },
    ]);
    expect(found.map((v) => `${v.file} → ${v.imports}`)).toEqual([
      'queue/scheduler.ts → ../services/training-jobs.js',
      'store/x.ts → ../api/app.js',
      'newfolder/x.ts → ',
    ]);
  });

  it('no file in src/ imports from a higher floor', () => {
    const files = sourceFiles(SRC).map((file) => ({ file, source: fs.readFileSync(file, 'utf8') }));
    expect(files.length).toBeGreaterThan(100);
    expect(floorViolations(files)).toEqual([]);
  });
});
