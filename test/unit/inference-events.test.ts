// The one stream vocabulary (src/protocol/inference-events.ts) end to end without processes: the worker host reports
// the handler's events unchanged, the schema carries them, the gateway hands chunks to the route's call and settles
// it with the result or the error event, whose status and OpenAI fields reach the HTTP error as the worker gave them.
import { describe, expect, it } from 'vitest';
import { WorkerHost } from '../../worker/host.js';
import { TaskError, type Handlers } from '../../worker/handlers.js';
import { WorkerMessage } from '../../src/protocol/messages.js';
import { InferenceFailure, type InferenceEvent } from '../../src/protocol/inference-events.js';
import { InferenceGateway } from '../../src/queue/inference-gateway.js';
import type { QueueAdapter } from '../../src/queue/port.js';
import type { InferenceTask } from '../../src/protocol/messages.js';
import { wireErrorOf } from '../../src/api/errors.js';

const task = (op: InferenceTask['op'] = 'chat'): InferenceTask => ({ requestId: 'r1', op, body: {}, model: { baseModel: 'm', baseModelDir: '/m', adapterDir: null, name: 'm' }, stream: true });

async function reportsOf(inference: Handlers['inference'], op: InferenceTask['op'] = 'chat'): Promise<WorkerMessage[]> {
  const reports: WorkerMessage[] = [];
  const host = new WorkerHost({ id: 'w', kind: 'inference', device: 'cpu' }, { inference }, (m) => void reports.push(m), () => {});
  await host.runInference(task(op));
  return reports.filter((m) => m.type === 'inference.event');
}

describe('the worker host reports the answer as the adapter made it', () => {
  it('each event unchanged in an inference.event report; the worker time on the first chunk only; nothing after the result', async () => {
    const events: InferenceEvent[] = [
      { type: 'chunk', data: { choices: [{ delta: { content: 'a' } }] } },
      { type: 'chunk', data: { choices: [{ delta: { content: 'b' } }] } },
      { type: 'result', data: { usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } } },
    ];
    const reports = await reportsOf(async (_t, ctx) => {
      for (const e of events) ctx.emit(e);
      ctx.emit({ type: 'chunk', data: 'late' }); // after the result: not sent
    });
    expect(reports.map((r) => (r.type === 'inference.event' ? r.event : null))).toEqual(events);
    expect(reports.map((r) => (r.type === 'inference.event' ? r.workerMs : null))).toEqual([expect.any(Number), undefined, undefined]);
    // Each report is what the transports' schema accepts, unchanged by it.
    for (const r of reports) expect(WorkerMessage.parse(JSON.parse(JSON.stringify(r)))).toEqual(r);
  });

  it('an error event goes as the adapter gave it; a thrown TaskError becomes one; a ping is a result', async () => {
    const error: InferenceEvent = { type: 'error', status: 400, message: 'bad', param: 'response_format', code: 'unsupported_parameter' };
    expect(await reportsOf(async (_t, ctx) => ctx.emit(error))).toMatchObject([{ requestId: 'r1', event: error }]);
    expect(await reportsOf(async () => Promise.reject(new TaskError(503, 'model m could not be loaded')))).toMatchObject([
      { event: { type: 'error', status: 503, message: 'model m could not be loaded' } },
    ]);
    expect(await reportsOf(async () => Promise.reject(new Error('secret stack')))).toMatchObject([{ event: { type: 'error', status: 500, message: 'inference failed in the worker' } }]);
    expect(await reportsOf(async () => {})).toMatchObject([{ event: { type: 'error', status: 500 } }]); // no answer is an error, not a hang
    expect(await reportsOf(undefined, 'ping')).toMatchObject([{ event: { type: 'result', data: { pong: true, worker: 'w' } }, workerMs: expect.any(Number) }]);
  });
});

describe('the gateway settles the route\'s call from the events', () => {
  const started: InferenceTask[] = [];
  const adapter = { startInference: async (t: InferenceTask) => void started.push(t), cancelInference: async () => {} } as unknown as QueueAdapter;

  it('chunks to onChunk (after the worker time), the result resolves, later events do nothing', async () => {
    const gateway = new InferenceGateway(adapter, 10, 60_000);
    const seen: unknown[] = [];
    const p = gateway.submit({ op: 'chat', body: {}, model: null, stream: true, queueKey: 'k', onChunk: (d) => seen.push(d), onWorkerTime: (ms) => seen.push(`time ${ms}`) });
    const id = started.at(-1)!.requestId;
    gateway.event(id, { type: 'chunk', data: 'a' }, 12);
    gateway.event(id, { type: 'chunk', data: 'b' });
    gateway.event(id, { type: 'result', data: { usage: 1 } });
    gateway.event(id, { type: 'chunk', data: 'late' });
    await expect(p).resolves.toEqual({ usage: 1 });
    expect(seen).toEqual(['time 12', 'a', 'b']);
  });

  it('an error event rejects with the event itself: its status, param and code reach the HTTP error once, as given', async () => {
    const gateway = new InferenceGateway(adapter, 10, 60_000);
    const p = gateway.submit({ op: 'chat', body: {}, model: null, stream: false, queueKey: 'k' });
    const id = started.at(-1)!.requestId;
    const event = { type: 'error' as const, status: 413, message: 'answer too large', param: 'max_tokens', code: 'invalid_value' };
    gateway.event(id, event);
    const err = await p.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InferenceFailure);
    expect((err as InferenceFailure).event).toEqual(event);
    expect(wireErrorOf(err)).toEqual({ status: 413, message: 'answer too large', headers: {}, param: 'max_tokens', code: 'invalid_value' });
  });
});
