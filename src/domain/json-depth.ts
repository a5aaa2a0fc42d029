// How deeply a JSON text nests, found by a scan that skips string contents. Request bodies nested
// thousands of levels deep parse fine but overflow the stack of every recursive walk after the parse
// (JSON.stringify when storing, the table digest writer), so the body parser refuses them up front.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;

/**
 * Python's json.loads gives up near 1000 levels (its recursion limit), where FastAPI answers 400
 * "There was an error parsing the body"; Hearth draws the line at the same depth.
 */
export const MAX_JSON_DEPTH = 1000;

/** True when `text` opens more than `limit` arrays/objects inside one another (invalid JSON is not judged). */
export function nestsDeeperThan(text: string, limit: number = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      for (i++; i < n; i++) {
        const d = text.charCodeAt(i);
        if (d === BACKSLASH) i++;
        else if (d === QUOTE) break;
      }
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}
