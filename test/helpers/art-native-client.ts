// ART's N2 RemoteTrainingClient over HTTP, for the native-runs tests: what it sends, and its reads checked against
// the zod copies of its pydantic models (art-native-models.ts).
import { expect } from 'vitest';
import type { z } from 'zod';
import type { TestServer } from './server.js';
import { waitFor } from './wait.js';
import { NativeTrainingOperation, NativeTrainingResult } from './art-native-models.js';

/** `value` read as `schema` (the test fails, naming the issues, where it does not validate). */
export function parseAs<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const r = schema.safeParse(value);
  expect(r.success, JSON.stringify(r.error?.issues ?? null)).toBe(true);
  return r.data as z.output<T>;
}

export type NativeOp = z.output<typeof NativeTrainingOperation>;

/** Calls as `key` on the server of the running test file (getters: both are set in its beforeAll). */
export function nativeClient(server: () => TestServer, key: () => string) {
  // Body-less POSTs (`:cancel`, `:close`) go out as ART's openai client sends them: JSON content type, empty body.
  const post = (path: string, body?: unknown) =>
    server().call('POST', `/v1${path}`, { key: key(), ...(body === undefined ? { rawBody: '', headers: { 'content-type': 'application/json' } } : { body }) });
  const get = (path: string) => server().call('GET', `/v1${path}`, { key: key() });

  /** RemoteTrainingOperation.result(): poll to a terminal status, then fetch the result if one is available. */
  async function terminal(runId: string, op: NativeOp): Promise<{ op: NativeOp; result: Record<string, unknown> | null }> {
    const done = await waitFor(async () => {
      const r = await get(`/training/runs/${runId}/operations/${op.operation_id}`);
      expect(r.status).toBe(200);
      const o = parseAs(NativeTrainingOperation, r.body);
      // _operation_ref(operation) != self._ref → "remote operation identity changed"
      expect([o.run_id, o.sequence_id, o.kind, o.learner_parent_version, o.reserved_output_learner_version]).toEqual(
        [op.run_id, op.sequence_id, op.kind, op.learner_parent_version, op.reserved_output_learner_version],
      );
      return ['succeeded', 'failed', 'cancelled'].includes(o.status) ? o : null;
    }, `operation ${op.kind} #${op.sequence_id}`, 180_000, 100);
    if (done.status !== 'succeeded' || !done.result_available) return { op: done, result: null };
    const r = await get(`/training/runs/${runId}/operations/${op.operation_id}/result`);
    expect(r.status).toBe(200);
    const envelope = parseAs(NativeTrainingResult, r.body);
    expect([envelope.operation_id, envelope.kind, envelope.result.operation_id]).toEqual([done.operation_id, done.kind, done.operation_id]);
    return { op: done, result: envelope.result };
  }

  return { post, get, terminal };
}
