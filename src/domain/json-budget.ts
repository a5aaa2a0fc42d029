// How many values a JSON text holds, and how deeply it nests, found by one scan over its characters
// (string contents skipped) before anything parses it. Parsing costs memory per value, not per byte:
// 64 MiB of `{},{},…` is 22 million objects (~1.4 GB of heap once parsed, more once validated and copied),
// while the same bytes of ART trajectories are ~6 million values. So each JSON route has a value budget
// next to its byte limit, and a body over it is refused before JSON.parse allocates anything.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;
const SPACE = 0x20;
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;

export interface JsonBudget {
  /** Most values (objects, arrays, strings, numbers, literals; object keys are not values) the text may hold. */
  maxValues: number;
  /** Most arrays/objects open inside one another. */
  maxDepth: number;
}

/** Which budget a text exceeds first, or null when it stays within both (invalid JSON is not judged). */
export type JsonBudgetExcess = { limit: 'values'; max: number } | { limit: 'depth'; max: number } | null;

/**
 * Scan `text` once: count the values it holds (each element of an array, each member value of an object, and
 * the top value) and track the nesting depth, stopping at the first budget exceeded. A value can be no shorter
 * than one character, so texts no longer than both budgets are accepted without a scan.
 */
export function exceedsJsonBudget(text: string, budget: JsonBudget): JsonBudgetExcess {
  const scan = budgetScan(text, budget, Number.POSITIVE_INFINITY);
  for (;;) {
    const step = scan.next();
    if (step.done) return step.value;
  }
}

/**
 * exceedsJsonBudget for a large body on a server's only thread: the scan pauses every `sliceChars` characters for
 * a turn of the event loop, so other requests are answered while a multi-megabyte body is judged.
 */
export async function exceedsJsonBudgetYielding(text: string, budget: JsonBudget, sliceChars = 1 << 20): Promise<JsonBudgetExcess> {
  const scan = budgetScan(text, budget, sliceChars);
  for (;;) {
    const step = scan.next();
    if (step.done) return step.value;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** The scan, pausing (yield) after every `sliceChars` characters; its return value is the verdict. */
function* budgetScan(text: string, budget: JsonBudget, sliceChars: number): Generator<void, JsonBudgetExcess, void> {
  const n = text.length;
  if (n <= budget.maxValues && n <= budget.maxDepth) return null;
  // inObject[d]: whether the container at depth d is an object (its `,` is followed by a key, not a value).
  const inObject = new Uint8Array(budget.maxDepth + 2);
  let depth = 0;
  let values = 0;
  let expectValue = true; // at the start, after `[`, after `:` and after `,` in an array
  let pauseAt = sliceChars;
  for (let i = 0; i < n; i++) {
    if (i >= pauseAt) {
      yield;
      pauseAt = i + sliceChars;
    }
    const c = text.charCodeAt(i);
    if (c === SPACE || c === LF || c === CR || c === TAB) continue;
    if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      if (depth > 0) depth--;
      expectValue = false;
      continue;
    }
    if (c === COMMA) {
      expectValue = inObject[depth] === 0;
      continue;
    }
    if (c === COLON) {
      expectValue = true;
      continue;
    }
    if (expectValue) {
      if (++values > budget.maxValues) return { limit: 'values', max: budget.maxValues };
      expectValue = false;
    }
    if (c === QUOTE) {
      for (i++; i < n; i++) {
        if (i >= pauseAt) {
          yield;
          pauseAt = i + sliceChars;
        }
        const d = text.charCodeAt(i);
        if (d === BACKSLASH) i++;
        else if (d === QUOTE) break;
      }
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > budget.maxDepth) return { limit: 'depth', max: budget.maxDepth };
      inObject[depth] = c === OPEN_BRACE ? 1 : 0;
      expectValue = c === OPEN_BRACKET;
    }
    // Other characters continue a number or literal already counted.
  }
  return null;
}
