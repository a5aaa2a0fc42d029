// Stop strings, matched on the decoded text (so a stop string split over several tokens is still
// found). Text is released to the client only when it can no longer be the start of a stop
// string; the stop string itself is not part of the output (unless includeStopStr).

export interface StopCheck {
  /** Text that is now safe to emit. */
  emit: string;
  /** The stop string that matched, or null. */
  stopped: string | null;
}

export class StopStringMatcher {
  /** Decoded text not yet emitted because it may begin a stop string. */
  private pending = '';
  private done = false;

  constructor(
    private readonly stops: readonly string[],
    private readonly includeStopStr = false,
  ) {
    for (const s of stops) if (s.length === 0) throw new Error('stop strings must not be empty');
  }

  /** Feeds newly decoded text. After a match, further calls emit nothing. */
  push(text: string): StopCheck {
    if (this.done) return { emit: '', stopped: null };
    const buf = this.pending + text;
    const hit = earliestMatch(buf, this.stops);
    if (hit) {
      this.done = true;
      this.pending = '';
      const end = this.includeStopStr ? hit.index + hit.stop.length : hit.index;
      return { emit: buf.slice(0, end), stopped: hit.stop };
    }
    const hold = longestPartialSuffix(buf, this.stops);
    this.pending = buf.slice(buf.length - hold);
    return { emit: buf.slice(0, buf.length - hold), stopped: null };
  }

  /** At the end of generation (EOS, length), held-back text was not a stop string: release it. */
  flush(): string {
    const rest = this.done ? '' : this.pending;
    this.pending = '';
    return rest;
  }
}

/** The stop string that occurs first in `text` (the longest one if several start at the same place). */
export function earliestMatch(text: string, stops: readonly string[]): { index: number; stop: string } | null {
  let best: { index: number; stop: string } | null = null;
  for (const stop of stops) {
    const index = text.indexOf(stop);
    if (index < 0) continue;
    if (!best || index < best.index || (index === best.index && stop.length > best.stop.length)) best = { index, stop };
  }
  return best;
}

/** Length of the longest suffix of `text` that is a proper prefix of some stop string. */
export function longestPartialSuffix(text: string, stops: readonly string[]): number {
  let hold = 0;
  for (const stop of stops) {
    for (let n = Math.min(stop.length - 1, text.length); n > hold; n--) {
      if (text.endsWith(stop.slice(0, n))) {
        hold = n;
        break;
      }
    }
  }
  return hold;
}
