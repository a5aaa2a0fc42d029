// A small seeded pseudo-random generator (sfc32, state seeded with splitmix32) so that the same
// `seed` gives the same sampled tokens on every run and machine. Math.random cannot be seeded.

export interface Rng {
  /** Uniform float in [0, 1). */
  next(): number;
}

function splitmix32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

/** Seeds accept any integer JSON can carry (negative and >2^32 included). */
export function createRng(seed: number): Rng {
  if (!Number.isSafeInteger(seed)) throw new Error(`seed must be a safe integer, got ${seed}`);
  const hi = Math.floor(seed / 2 ** 32);
  const lo = seed - hi * 2 ** 32;
  const mix = splitmix32((lo ^ Math.imul(hi | 0, 0x27d4eb2d)) >>> 0);
  let a = mix(), b = mix(), c = mix(), d = mix();
  const rng: Rng = {
    next() {
      // sfc32
      const t = (((a + b) >>> 0) + d) >>> 0;
      d = (d + 1) >>> 0;
      a = b ^ (b >>> 9);
      b = (c + (c << 3)) >>> 0;
      c = ((c << 21) | (c >>> 11)) >>> 0;
      c = (c + t) >>> 0;
      return t / 2 ** 32;
    },
  };
  for (let i = 0; i < 12; i++) rng.next(); // warm up away from the seed
  return rng;
}

/** A seed for requests that did not give one. */
export function randomSeed(): number {
  return Math.floor(Math.random() * 2 ** 48);
}
