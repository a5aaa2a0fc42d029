// SHA-256 whose intermediate state can be saved and resumed.
//
// A table digest is sha256 over the concatenated row digests of the whole table. Node's native
// hash cannot be saved to disk half-way, so appending one row to a 1M-row table would re-hash
// 43 MB. With this hasher the store keeps the state at every chunk boundary and resumes from
// the last unchanged boundary, hashing only what follows it.

// Int32Array (not Uint32Array): V8 keeps 32-bit signed values as small integers, which is
// several times faster than the doubles unsigned words above 2^31 turn into.
const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

const INITIAL_H = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/** Everything needed to continue hashing: chaining value, bytes consumed, unprocessed tail. */
export interface Sha256State {
  h: Int32Array; // 8 words
  length: number; // total bytes fed so far
  pending: Uint8Array; // < 64 bytes not yet compressed
}

/** Serialized state size: 32 bytes h + 8 bytes length + 1 byte pending length + 63 bytes pending. */
export const SHA256_STATE_BYTES = 104;

export class ResumableSha256 {
  private readonly h: Int32Array;
  private length: number;
  private readonly block = new Uint8Array(64);
  private blockUsed: number;
  private readonly w = new Int32Array(64);

  constructor(state?: Sha256State) {
    this.h = new Int32Array(state ? state.h : INITIAL_H);
    this.length = state ? state.length : 0;
    this.blockUsed = 0;
    if (state) {
      this.block.set(state.pending);
      this.blockUsed = state.pending.length;
    }
  }

  update(data: Uint8Array): this {
    let offset = 0;
    this.length += data.length;
    if (this.blockUsed > 0) {
      const take = Math.min(64 - this.blockUsed, data.length);
      this.block.set(data.subarray(0, take), this.blockUsed);
      this.blockUsed += take;
      offset = take;
      if (this.blockUsed < 64) return this;
      this.compress(this.block, 0);
      this.blockUsed = 0;
    }
    while (offset + 64 <= data.length) {
      this.compress(data, offset);
      offset += 64;
    }
    if (offset < data.length) {
      this.block.set(data.subarray(offset), 0);
      this.blockUsed = data.length - offset;
    }
    return this;
  }

  /** A copy of the current state (the hasher stays usable). */
  state(): Sha256State {
    return { h: new Int32Array(this.h), length: this.length, pending: this.block.slice(0, this.blockUsed) };
  }

  /** Finish a copy of the current state and return the digest as lowercase hex. */
  hexDigest(): string {
    const finisher = new ResumableSha256(this.state());
    const bitLength = finisher.length * 8;
    const padLength = (finisher.blockUsed < 56 ? 56 : 120) - finisher.blockUsed;
    const padding = new Uint8Array(padLength + 8);
    padding[0] = 0x80;
    // 64-bit big-endian bit length; lengths stay far below 2^53.
    const view = new DataView(padding.buffer);
    view.setUint32(padLength, Math.floor(bitLength / 0x100000000));
    view.setUint32(padLength + 4, bitLength >>> 0);
    finisher.update(padding);
    let hex = '';
    for (const word of finisher.h) hex += (word >>> 0).toString(16).padStart(8, '0');
    return hex;
  }

  private compress(data: Uint8Array, offset: number): void {
    const w = this.w;
    for (let i = 0; i < 16; i++) {
      const j = offset + i * 4;
      w[i] = (data[j] << 24) | (data[j + 1] << 16) | (data[j + 2] << 8) | data[j + 3];
    }
    for (let i = 16; i < 64; i++) {
      const x = w[i - 15];
      const y = w[i - 2];
      const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
      const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
    }
    const h = this.h;
    let a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (let i = 0; i < 64; i++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const ch = (e & f) ^ (~e & g);
      const t1 = (hh + S1 + ch + K[i] + w[i]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const maj = (a & b) ^ (a & c) ^ (b & c);
      const t2 = (S0 + maj) | 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h[0] = (h[0] + a) | 0;
    h[1] = (h[1] + b) | 0;
    h[2] = (h[2] + c) | 0;
    h[3] = (h[3] + d) | 0;
    h[4] = (h[4] + e) | 0;
    h[5] = (h[5] + f) | 0;
    h[6] = (h[6] + g) | 0;
    h[7] = (h[7] + hh) | 0;
  }
}

export function initialSha256State(): Sha256State {
  return { h: new Int32Array(INITIAL_H), length: 0, pending: new Uint8Array(0) };
}

/** Fixed-size binary form, so states can be packed back to back in one blob. */
export function encodeSha256State(state: Sha256State, target: Uint8Array, offset: number): void {
  const view = new DataView(target.buffer, target.byteOffset + offset, SHA256_STATE_BYTES);
  for (let i = 0; i < 8; i++) view.setInt32(i * 4, state.h[i]);
  view.setFloat64(32, state.length);
  view.setUint8(40, state.pending.length);
  target.set(state.pending, offset + 41);
}

export function decodeSha256State(source: Uint8Array, offset: number): Sha256State {
  const view = new DataView(source.buffer, source.byteOffset + offset, SHA256_STATE_BYTES);
  const h = new Int32Array(8);
  for (let i = 0; i < 8; i++) h[i] = view.getInt32(i * 4);
  const length = view.getFloat64(32);
  const pendingLength = view.getUint8(40);
  const pending = source.slice(offset + 41, offset + 41 + pendingLength);
  return { h, length, pending };
}
