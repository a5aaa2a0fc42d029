// A device fault in the middle of a request, through real HTTP and real worker processes (embedded queue, the
// generated demo model, the real engine): the error point `inference-run-error` makes the worker's next ONNX Runtime
// run fail with a device's error text (fault-points.ts). Out of memory: that request gets 503 naming the device and
// the same worker serves the next one on a new session. Lost: 503 naming the device, the worker exits (75) and
// `hearth serve` starts a new one, which serves the next request.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { ensureDemoModel } from '../../src/models/demo-model.js';
import type { EmbeddedQueue } from '../../src/queue/embedded.js';
import { startServer, tempHome, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const BASE = 'hearth/tiny-random-llama';
const body = { model: BASE, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 6, temperature: 0 };

describe('a device fault during a request', () => {
  let s: TestServer;
  const faultDir = tempHome('hearth-faults-device-');
  let key: string;
  const adapter = () => s.ctx.queue!.adapter as EmbeddedQueue;
  const chat = async () => {
    const res = await fetch(`${s.url}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as { error?: { message: string }; choices?: unknown[] } };
  };
  const arm = (message: string) => fs.writeFileSync(path.join(faultDir, 'inference-run-error'), message);

  beforeAll(async () => {
    const home = tempHome();
    await ensureDemoModel(home);
    s = await startServer({ home, env: { HEARTH_WORKERS: 'inference:cpu' }, queue: { workerEnv: { HEARTH_MAX_CONTEXT: '1024', HEARTH_FAULT_DIR: faultDir } } });
    key = s.key('alice');
    await waitFor(() => s.ctx.queue!.liveWorkers('inference').length > 0, 'an inference worker', 30_000);
  }, 60_000);
  afterAll(async () => {
    await s?.close();
  });

  it('out of memory: 503 naming the device, and the same worker serves the next request', async () => {
    expect((await chat()).status).toBe(200); // the model is loaded
    const [pid] = adapter().pids('inference');
    arm('CUDA failure 2: out of memory ; GPU=0');
    const failed = await chat();
    expect(failed.status).toBe(503);
    expect(failed.body.error?.message).toMatch(/device cpu ran out of memory during this request/);
    const after = await chat();
    expect(after.status).toBe(200);
    expect(adapter().pids('inference')).toEqual([pid]);
  }, 60_000);

  it('lost: 503 naming the device, the worker exits and a new one serves the next request', async () => {
    const [pid] = adapter().pids('inference');
    arm('WebGPU device lost: Device was lost');
    const failed = await chat();
    expect(failed.status).toBe(503);
    expect(failed.body.error?.message).toMatch(/device cpu was lost during this request/);
    await waitFor(() => adapter().pids('inference').every((p) => p !== pid) && s.ctx.queue!.liveWorkers('inference').some((w) => w.pid !== pid), 'a new inference worker', 30_000);
    expect((await chat()).status).toBe(200);
  }, 90_000);
});
