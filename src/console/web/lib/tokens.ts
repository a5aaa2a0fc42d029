// Streamed chat chunks → displayable pieces with their token logprobs. Hearth writes tokens as
// `token_id:<id>` and gives each token's UTF-8 bytes, which is what the hover shows as text.
export interface TokenAlternative {
  text: string;
  logprob: number;
}

export interface Piece {
  text: string;
  /** The chosen token(s) of this piece with their logprobs and the top alternatives. */
  tokens: { text: string; logprob: number; top: TokenAlternative[] }[];
}

interface LogprobEntry { token: string; logprob: number; bytes: number[] | null; top_logprobs?: { token: string; logprob: number; bytes: number[] | null }[] }

const decoder = new TextDecoder();

/** A token's text: its bytes decoded (invalid sequences shown as U+FFFD), else the token string. */
export function tokenText(entry: { token: string; bytes: number[] | null }): string {
  return entry.bytes ? decoder.decode(new Uint8Array(entry.bytes)) : entry.token;
}

/** One piece per chunk of the first choice; null when the chunk carries no text. */
export function pieceOfChunk(chunk: any): Piece | null {
  const choice = chunk?.choices?.[0];
  const text: string = choice?.delta?.content ?? '';
  const entries: LogprobEntry[] = choice?.logprobs?.content ?? [];
  if (!text && entries.length === 0) return null;
  return {
    text,
    tokens: entries.map((e) => ({
      text: tokenText(e),
      logprob: e.logprob,
      top: (e.top_logprobs ?? []).map((t) => ({ text: tokenText(t), logprob: t.logprob })),
    })),
  };
}

/**
 * The marker a piece shows when its text draws nothing: '∅' for no text (a special token, or a byte held
 * until its character is complete), '↵' for bare line breaks, '·' for control or format characters only
 * (a form feed, a zero-width joiner), '◌' for combining marks only (an accent or a variation selector on its
 * own: it draws on the character before, and its box measured 0 px wide in Chromium; on the dotted circle it
 * shows). Without it such a token has no box to hover and its logprob cannot be seen. Shown by CSS from an
 * attribute, so it is not part of the copied text.
 */
export function blankMark(text: string): string | null {
  if (text === '') return '∅';
  if (/^[\r\n]+$/.test(text)) return '↵';
  if (/^[\p{Cc}\p{Cf}]+$/u.test(text) && !text.includes('\t')) return '·';
  if (/^\p{M}+$/u.test(text)) return '◌';
  return null;
}

/** Probability as a percentage string. */
export function percent(logprob: number): string {
  const p = Math.exp(logprob) * 100;
  return p >= 99.95 ? '100%' : p < 0.01 ? '<0.01%' : `${p.toFixed(p < 1 ? 2 : 1)}%`;
}
