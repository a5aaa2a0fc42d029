// Issue #44's inference probes, through real HTTP on a real server (embedded queue, generated demo model, real
// engine), each scaled to run in seconds and each failing before the fix: one request from one key must not take
// the service down, hold its worker, or tell one tenant about another's prompts. The caps' arithmetic and the
// compiler's memoisation are unit-tested in test/unit/inference-abuse-bounds.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { ensureDemoModel } from '../../src/models/demo-model.js';
import type { EmbeddedQueue } from '../../src/queue/embedded.js';
import { startServer, tempHome, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { streamChat } from './faults-helpers.js';

const BASE = 'hearth/tiny-random-llama';

async function serverWithInferenceWorker(env: Record<string, string> = {}, workerEnv: Record<string, string> = {}): Promise<TestServer> {
  const home = tempHome('hearth-abuse-');
  await ensureDemoModel(home);
  const s = await startServer({
    home, env: { HEARTH_WORKERS: 'inference:cpu', ...env },
    queue: { workerEnv: { HEARTH_HEARTBEAT_INTERVAL_MS: '200', HEARTH_MAX_CONTEXT: '1024', ...workerEnv } },
  });
  await waitFor(() => s.ctx.queue!.liveWorkers('inference').length > 0, 'an inference worker', 30_000);
  return s;
}

const tokenPrompt = (length: number, offset = 0) => Array.from({ length }, (_, i) => 5 + ((i + offset) % 200));

/** Definitions D0 … D(levels-1), each an object holding the next one twice (probe 4: 24 levels, 2.8 KB). */
function chainedSchema(levels: number): Record<string, unknown> {
  const $defs: Record<string, unknown> = {};
  for (let i = 0; i < levels; i++)
    $defs[`D${i}`] = i === levels - 1 ? { type: 'integer' } : { type: 'object', properties: { a: { $ref: `#/$defs/D${i + 1}` }, b: { $ref: `#/$defs/D${i + 1}` } }, required: ['a', 'b'] };
  return { $defs, $ref: '#/$defs/D0' };
}

describe('bounded work per inference request', () => {
  let s: TestServer;
  let alice: string;
  let bob: string;
  const pid = () => (s.ctx.queue!.adapter as EmbeddedQueue).pids('inference')[0];
  /** The service still answers a 4-token chat, from the same worker process (nothing crashed or restarted). */
  const stillServing = async (workerPid: number) => {
    const r = await s.call('POST', '/v1/chat/completions', { key: alice, body: { model: BASE, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(pid()).toBe(workerPid);
  };

  beforeAll(async () => {
    s = await serverWithInferenceWorker();
    alice = s.key('alice');
    bob = s.key('bob');
  }, 60_000);
  afterAll(async () => s?.close());

  it('probe 5: echo + logprobs 20 + n 128 on long token-id prompts is a 400 naming the cap, and the worker lives', async () => {
    const before = pid();
    const probe = (prompts: number) =>
      s.call('POST', '/v1/completions', {
        key: bob, body: { model: BASE, prompt: Array.from({ length: prompts }, (_, i) => tokenPrompt(300, i)), echo: true, logprobs: 20, n: 128, max_tokens: 16 },
      });
    // As sent in the probe (3 prompts × n 128 = 384 sequences): past the sequence cap already.
    const asProbed = await probe(3);
    expect(asProbed.status).toBe(400);
    expect(asProbed.body.error).toMatchObject({ type: 'invalid_request_error', code: 'too_many_sequences' });
    // 2 prompts (256 sequences, within that cap): 2 × 128 × (300 + 16) × 21 tokens is past the answer cap.
    const r = await probe(2);
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param: 'logprobs', code: 'answer_too_large' });
    expect(r.body.error.message).toMatch(/could hold 1698816 tokens.*the limit is 1048576 \(HEARTH_MAX_ANSWER_TOKENS\)/);
    await stillServing(before);
  }, 60_000);

  it('an echoed answer of several MB crosses from the worker in pieces and arrives whole', async () => {
    // 2 prompts × n 16 × (300 + 8) × 21: ~200k entries, ~5 MB of JSON (> one 4 MiB IPC piece).
    const r = await s.call('POST', '/v1/completions', {
      key: alice, body: { model: BASE, prompt: [tokenPrompt(300), tokenPrompt(300, 7)], echo: true, logprobs: 20, n: 16, max_tokens: 8, ignore_eos: true },
    });
    expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(200);
    expect(JSON.stringify(r.body).length).toBeGreaterThan(4 * 2 ** 20);
    expect(r.body.choices).toHaveLength(32);
    for (const c of r.body.choices) {
      expect(c.logprobs.tokens).toHaveLength(308);
      expect(c.logprobs.token_logprobs[0]).toBeNull();
      expect(Object.keys(c.logprobs.top_logprobs[1]).length).toBeGreaterThan(0);
    }
  }, 60_000);

  it('probe 6: 100 prompts × n 128 (12,800 sequences in 713 bytes) is a 400 naming the cap', async () => {
    const before = pid();
    const r = await s.call('POST', '/v1/completions', { key: bob, body: { model: BASE, prompt: Array.from({ length: 100 }, (_, i) => `p${i}`), n: 128, max_tokens: 16 } });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param: 'prompt', code: 'too_many_sequences' });
    expect(r.body.error.message).toMatch(/12800 sequences.*256.*HEARTH_MAX_SEQUENCES_PER_REQUEST/);
    await stillServing(before);
  }, 60_000);

  it('probe 4: a response_format of 24 chained definitions each used twice is served at once', async () => {
    const before = pid();
    const schema = chainedSchema(24);
    expect(JSON.stringify(schema).length).toBeLessThan(4000);
    const started = Date.now();
    const r = await s.call('POST', '/v1/chat/completions', {
      key: bob, body: { model: BASE, messages: [{ role: 'user', content: 'tree' }], max_tokens: 8, response_format: { type: 'json_schema', json_schema: { name: 'tree', schema } } },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // Constrained: whatever came out is a prefix of the tree's JSON (it cannot finish in 8 tokens).
    expect(r.body.choices[0].message.content).toMatch(/^\s?\{/);
    console.log(`[abuse] 24-level chained schema answered in ${Date.now() - started} ms`);
    await stillServing(before);
  }, 30_000); // before the fix this request never came back (the worker hung expanding 2^24 subschemas, then OOM)

  it('a schema past the node cap is a 400 naming HEARTH_SCHEMA_MAX_NODES', async () => {
    const wide = { type: 'object', properties: Object.fromEntries(Array.from({ length: 12_000 }, (_, i) => [`k${i}`, { type: 'integer' }])) };
    const r = await s.call('POST', '/v1/chat/completions', {
      key: bob, body: { model: BASE, messages: [{ role: 'user', content: 'x' }], max_tokens: 4, response_format: { type: 'json_schema', json_schema: { name: 'wide', schema: wide } } },
    });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param: 'response_format', code: 'schema_too_complex' });
    expect(r.body.error.message).toMatch(/more than 10000 subschemas.*HEARTH_SCHEMA_MAX_NODES/);
  }, 30_000);

  it('probe 7: bob gets no prefix-cache hit on the prompt alice just sent (finished or still running); alice does', async () => {
    const chat = (key: string, content: string) =>
      s.call('POST', '/v1/chat/completions', { key, body: { model: BASE, messages: [{ role: 'user', content }], max_tokens: 2, temperature: 0 } });
    const secret = 'The quarterly numbers for project falcon are: revenue up, costs down, launch in May. '.repeat(3);
    const first = await chat(alice, secret);
    expect(first.status).toBe(200);
    expect(first.body.usage.prompt_tokens).toBeGreaterThan(40);
    // Sharing within an entity stays: alice's repeat reuses her cached prefix.
    const again = await chat(alice, secret);
    expect(again.body.usage.prompt_tokens_details?.cached_tokens).toBeGreaterThan(32);
    // Bob's identical prompt is computed from scratch.
    const probe = await chat(bob, secret);
    expect(probe.status).toBe(200);
    expect(probe.body.usage.prompt_tokens).toBe(first.body.usage.prompt_tokens);
    expect(probe.body.usage.prompt_tokens_details?.cached_tokens ?? 0).toBe(0);

    // While alice's request is still running (its cache is shared with same-prompt newcomers of her own).
    const live = 'Board memo, confidential: the merger with northwind closes on Friday; tell nobody. '.repeat(3);
    let chunks = 0;
    const stream = streamChat(s.url, alice, { model: BASE, messages: [{ role: 'user', content: live }], max_tokens: 400, ignore_eos: true }, () => chunks++);
    await waitFor(() => chunks >= 3, 'alice to be decoding', 30_000, 5);
    const during = await chat(bob, live);
    expect(during.status).toBe(200);
    expect(during.body.usage.prompt_tokens_details?.cached_tokens ?? 0).toBe(0);
    const own = await chat(bob, live);
    expect(own.body.usage.prompt_tokens_details?.cached_tokens).toBeGreaterThan(32); // bob's own prompt, now cached for bob
    expect((await stream).done).toBe(true);
  }, 60_000);
});

describe('a worker the API declares dead', () => {
  let s: TestServer;
  const faultDir = tempHome('hearth-abuse-faults-');
  const arm = path.join(faultDir, 'inference-model-load');

  beforeAll(async () => {
    // A 2 s heartbeat timeout and a 3 s load timeout: a worker blocked in its model load is declared dead after 3 s.
    s = await serverWithInferenceWorker({ HEARTH_HEARTBEAT_TIMEOUT: '2', HEARTH_LOAD_TIMEOUT: '3' }, { HEARTH_FAULT_DIR: faultDir });
  }, 60_000);
  afterAll(async () => {
    fs.rmSync(arm, { force: true });
    await s?.close();
  });

  it('is killed and replaced: its request fails with the documented 503 and the service answers again', async () => {
    const adapter = s.ctx.queue!.adapter as EmbeddedQueue;
    const [victim] = adapter.pids('inference');
    fs.writeFileSync(arm, ''); // the worker's next model load blocks its thread, as a runaway computation would
    const key = s.key('alice');
    const body = { model: BASE, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 };
    const blocked = await s.call('POST', '/v1/chat/completions', { key, body });
    expect(fs.readFileSync(`${arm}.reached`, 'utf8')).toBe(String(victim));
    expect(blocked.status).toBe(503);
    expect(blocked.body.error.message).toMatch(/the inference worker .*; retry/);
    // The blocked process is gone (before the fix it stayed, holding its slot, until it died by itself) …
    await waitFor(() => {
      try {
        process.kill(victim, 0);
        return false;
      } catch {
        return true;
      }
    }, 'the blocked worker to be killed', 15_000);
    fs.rmSync(arm);
    // … and a new one serves.
    await waitFor(() => s.ctx.queue!.liveWorkers('inference').some((w) => w.pid !== victim), 'a replacement inference worker', 30_000);
    const after = await s.call('POST', '/v1/chat/completions', { key, body });
    expect(after.status, JSON.stringify(after.body)).toBe(200);
    expect(adapter.pids('inference')).not.toContain(victim);
  }, 60_000);
});
