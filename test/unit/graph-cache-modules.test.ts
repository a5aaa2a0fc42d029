// The graph cache keys builds by the source of the modules that decide a graph's bytes (BUILDER_MODULES):
// a builder module missing from that list could change the graph while cached graphs stay in use.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUILDER_MODULES } from '../../src/runtime/graph-cache.js';

const RUNTIME = join(import.meta.dirname, '../../src/runtime');

/** The src/runtime modules `source` imports for values (not `import type` / `export type`), by name. */
function valueImports(source: string): string[] {
  const found: string[] = [];
  const clause = String.raw`(?:\{[^}]*\}|\*(?:\s+as\s+\w+)?|\w+(?:\s*,\s*\{[^}]*\})?)`;
  for (const m of source.matchAll(new RegExp(String.raw`^(import|export)\s+(type\s+)?${clause}\s+from\s+'\./([\w-]+)\.js'`, 'gm'))) if (!m[2]) found.push(m[3]);
  return found;
}

/** Every module the decoder-graph builder reaches from llama-graph.ts through value imports. */
function builderClosure(): Set<string> {
  const seen = new Set<string>();
  const visit = (name: string) => {
    if (seen.has(name)) return;
    seen.add(name);
    for (const dep of valueImports(readFileSync(join(RUNTIME, `${name}.ts`), 'utf8'))) visit(dep);
  };
  visit('llama-graph');
  return seen;
}

describe('graph cache key', () => {
  it('reads value imports, not type-only ones', () => {
    const src = "import type { A } from './a.js';\nimport { b, type C } from './b.js';\nexport { d } from './d.js';\nexport type { E } from './e.js';\nimport {\n  f,\n} from './f.js';\nimport { g } from '../g.js';\nexport type H = {\n  h: string\n}\nimport * as i from './i.js';\nimport j, { k } from './j.js';";
    expect(valueImports(src)).toEqual(['b', 'd', 'f', 'i', 'j']);
  });

  it('covers every module the graph builder reaches', () => {
    const closure = builderClosure();
    expect(closure.size).toBeGreaterThan(5); // the walk followed imports
    expect([...closure].filter((m) => !BUILDER_MODULES.includes(m)).sort()).toEqual([]);
  });
});
