// GPT-2's byte-level alphabet: every byte gets a printable stand-in character (bytes_to_unicode), so
// byte-level BPE vocabularies are plain strings. Shared by the tokenizer (decoding) and the BPE trainer.

/** bytes_to_unicode: byte value → printable stand-in character. */
export function byteToUnicode(): string[] {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
  const out: string[] = new Array(256);
  bs.forEach((b, i) => (out[b] = String.fromCodePoint(cs[i])));
  return out;
}

/** The inverse table: stand-in character code → byte. */
export function unicodeToByte(): Map<number, number> {
  return new Map(byteToUnicode().map((ch, b) => [ch.codePointAt(0)!, b]));
}
