// Conversions between 16-bit floats (IEEE half, bfloat16) and float32.
// Used by the GGUF and safetensors readers; kept table-free for clarity.

/** IEEE 754 half (binary16) bits → float32 value. */
export function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24; // subnormal (or zero)
  if (exp === 0x1f) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** Decode a little-endian half-precision buffer into a new Float32Array. */
export function decodeF16(bytes: Uint8Array, count: number): Float32Array {
  const out = new Float32Array(count);
  const view = new DataView(bytes.buffer, bytes.byteOffset, count * 2);
  // Small lookup table: 65536 entries is 256 KB and makes multi-GB imports fast.
  const table = f16Table();
  for (let i = 0; i < count; i++) out[i] = table[view.getUint16(i * 2, true)];
  return out;
}

/** IEEE half bits → float32 through the lookup table (f16ToF32's Math.pow was 40% of a GGUF graph build). */
export function f16BitsToF32(h: number): number {
  return (cachedF16Table ?? f16Table())[h];
}

let cachedF16Table: Float32Array | null = null;
function f16Table(): Float32Array {
  if (!cachedF16Table) {
    cachedF16Table = new Float32Array(65536);
    for (let i = 0; i < 65536; i++) cachedF16Table[i] = f16ToF32(i);
  }
  return cachedF16Table;
}

/** Decode a little-endian bfloat16 buffer: bf16 is the top half of a float32. */
export function decodeBF16(bytes: Uint8Array, count: number): Float32Array {
  const out = new Float32Array(count);
  const outBits = new Uint32Array(out.buffer);
  const view = new DataView(bytes.buffer, bytes.byteOffset, count * 2);
  for (let i = 0; i < count; i++) outBits[i] = view.getUint16(i * 2, true) << 16;
  return out;
}

/** Decode little-endian float32 bytes into a new (aligned) Float32Array. */
export function decodeF32(bytes: Uint8Array, count: number): Float32Array {
  const out = new Float32Array(count);
  new Uint8Array(out.buffer).set(bytes.subarray(0, count * 4));
  return out;
}

// Scratch views for reading a float32's bits without allocating (hot in the GGUF quantizers).
const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

/** float32 → IEEE half bits, round-to-nearest-even (used by tests and writers). */
export function f32ToF16(value: number): number {
  scratchF32[0] = value;
  const x = scratchU32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >> shift;
    const rem = mant & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
  return sign | h;
}

/** float32 → bfloat16 bits, round-to-nearest-even; NaN stays a (quiet) NaN, as ggml converts. */
export function f32ToBF16(value: number): number {
  scratchF32[0] = value;
  const x = scratchU32[0];
  if ((x & 0x7fffffff) > 0x7f800000) return (x >>> 16) | 64;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}
