// The value/depth scan that runs before every JSON body is parsed (src/domain/json-budget.ts).
import { describe, expect, it } from 'vitest';
import { exceedsJsonBudget, exceedsJsonBudgetYielding } from '../../src/domain/json-budget.js';

/** The number of values JSON.parse builds for `text` (object keys are not values). */
function valuesOf(v: unknown): number {
  if (Array.isArray(v)) return 1 + v.reduce((n: number, x) => n + valuesOf(x), 0);
  if (v && typeof v === 'object') return 1 + Object.values(v).reduce((n: number, x) => n + valuesOf(x), 0);
  return 1;
}

/** The smallest value budget `text` fits (found through the scan itself). */
function counted(text: string): number {
  let max = 0;
  while (exceedsJsonBudget(text, { maxValues: max, maxDepth: 1000 }) !== null) max++;
  return max;
}

describe('exceedsJsonBudget', () => {
  it('counts every value JSON.parse would build, and no object key', () => {
    const texts = [
      '0', '"x"', 'null', '[]', '{}', '[1,2,3]', '{"a":1,"b":[true,false,null]}', ' [ {"k" : "v,:[]{}\\"" } , [ [ ] ] , -1.5e3 ] ',
      '{"a":{"b":{"c":[{},{"d":"}"}]}}}', '[{},{},{}]', '{"messages_and_choices":[{},{}],"reward":0}',
    ];
    for (const text of texts) expect(counted(text), text).toBe(valuesOf(JSON.parse(text)));
  });

  it('refuses a body of empty objects past the budget, and accepts it at the budget', () => {
    const text = `{"x":[${Array(5000).fill('{}').join(',')}]}`; // 5002 values
    expect(exceedsJsonBudget(text, { maxValues: 5002, maxDepth: 1000 })).toBeNull();
    expect(exceedsJsonBudget(text, { maxValues: 5001, maxDepth: 1000 })).toEqual({ limit: 'values', max: 5001 });
  });

  it('reports nesting past the depth budget, and ignores brackets inside strings', () => {
    const deep = '['.repeat(1001) + ']'.repeat(1001);
    expect(exceedsJsonBudget(deep, { maxValues: 1e9, maxDepth: 1000 })).toEqual({ limit: 'depth', max: 1000 });
    expect(exceedsJsonBudget('['.repeat(1000) + ']'.repeat(1000), { maxValues: 1e9, maxDepth: 1000 })).toBeNull();
    const inString = JSON.stringify({ s: '['.repeat(5000) + ',,,:::' });
    expect(exceedsJsonBudget(inString, { maxValues: 2, maxDepth: 1000 })).toBeNull();
  });

  it('skips escaped quotes inside strings', () => {
    const text = JSON.stringify(['a"b\\', 'c\\"d', '\\\\']) + ' '.repeat(2000);
    expect(exceedsJsonBudget(text, { maxValues: 4, maxDepth: 1000 })).toBeNull();
    expect(exceedsJsonBudget(text, { maxValues: 3, maxDepth: 1000 })).toEqual({ limit: 'values', max: 3 });
  });

  it('gives the same verdict when the scan pauses between slices, wherever a slice ends (inside strings and escapes too)', async () => {
    const texts = [
      ' [ {"k" : "v,:[]{}\\"" } , [ [ ] ] , -1.5e3 ] ', '{"a":{"b":{"c":[{},{"d":"}\\\\"}]}}}', `[${Array(300).fill('{"s":"a\\"b,c]"}').join(',')}]`,
      `${'['.repeat(40)}${']'.repeat(40)}`,
    ];
    for (const text of texts)
      for (const budget of [{ maxValues: 0, maxDepth: 1000 }, { maxValues: 5, maxDepth: 1000 }, { maxValues: 1e6, maxDepth: 1000 }, { maxValues: 1e6, maxDepth: 30 }])
        for (const slice of [1, 2, 3, 7, 64])
          expect(await exceedsJsonBudgetYielding(text, budget, slice), `${text.slice(0, 30)} ${JSON.stringify(budget)} slice ${slice}`).toEqual(exceedsJsonBudget(text, budget));
  });

  it('lets the event loop run while it scans a large body', async () => {
    const text = `[${Array(500_000).fill('{}').join(',')}]`;
    let turns = 0;
    const ticker = setInterval(() => turns++, 0);
    const verdict = await exceedsJsonBudgetYielding(text, { maxValues: 100_000, maxDepth: 1000 }, 10_000);
    clearInterval(ticker);
    expect(verdict).toEqual({ limit: 'values', max: 100_000 });
    expect(turns).toBeGreaterThan(0);
  });
});
