// Per-token logprobs a measuring training job reports (a native run's forward / forward_backward with
// `return_token_logprobs: true`, docs/art.md "Token logprobs"), and the buffers ART's contracts read them as.
//
// The worker reports, for each sequence it measured, the input row it came from and the learner logprob of every
// target: value t is log p(ids[t + 1] | ids[0..t]) at the job's weights, NaN where ids[t + 1] is not trained. The
// values travel as little-endian float32 in base64, inside the job's one gradient_step event: 4 bytes (5.3 in base64)
// per position, the same order as the token ids the API already holds for the operation.
import { z } from 'zod';

export const TokenLogprobsReport = z.object({
  /** The input row (line of the job's data, or RL token sequence) each measured sequence came from. */
  rows: z.array(z.number().int().nonnegative()),
  /** Values per measured sequence: its token count − 1. */
  lengths: z.array(z.number().int().nonnegative()),
  /** All values, sequence after sequence, float32 little-endian, base64. */
  data: z.string(),
});
export type TokenLogprobsReport = z.infer<typeof TokenLogprobsReport>;

/** float32 little-endian bytes of `values`, base64 (ART's `TokenLogprobs.data`, pydantic's base64 bytes). */
export function float32Base64(values: ArrayLike<number>): string {
  const bytes = Buffer.alloc(values.length * 4);
  for (let i = 0; i < values.length; i++) bytes.writeFloatLE(values[i], i * 4);
  return bytes.toString('base64');
}

/** The inverse of float32Base64. */
export function base64Float32(data: string): Float32Array {
  const bytes = Buffer.from(data, 'base64');
  if (bytes.length % 4 !== 0) throw new Error(`token logprobs: ${bytes.length} bytes is not a whole number of float32 values`);
  const out = new Float32Array(bytes.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4);
  return out;
}

/** The report of measured sequences: `rows[i]` is the input row of `values[i]`. */
export function encodeTokenLogprobs(rows: readonly number[], values: readonly Float32Array[]): TokenLogprobsReport {
  if (rows.length !== values.length) throw new Error(`token logprobs: ${rows.length} rows for ${values.length} sequences`);
  const flat = new Float32Array(values.reduce((a, v) => a + v.length, 0));
  let at = 0;
  for (const v of values) {
    flat.set(v, at);
    at += v.length;
  }
  return { rows: [...rows], lengths: values.map((v) => v.length), data: float32Base64(flat) };
}

/** Each reported input row's values (a report is checked whole: lengths must add up to the data). */
export function decodeTokenLogprobs(report: TokenLogprobsReport): Map<number, Float32Array> {
  const parsed = TokenLogprobsReport.parse(report);
  if (parsed.rows.length !== parsed.lengths.length) throw new Error(`token logprobs: ${parsed.rows.length} rows for ${parsed.lengths.length} lengths`);
  const flat = base64Float32(parsed.data);
  const total = parsed.lengths.reduce((a, n) => a + n, 0);
  if (total !== flat.length) throw new Error(`token logprobs: lengths add up to ${total} values, the data holds ${flat.length}`);
  const out = new Map<number, Float32Array>();
  let at = 0;
  parsed.rows.forEach((row, i) => {
    out.set(row, flat.subarray(at, at + parsed.lengths[i]));
    at += parsed.lengths[i];
  });
  return out;
}
