// SIGTERM to `hearth serve`: requests in flight finish (a stream runs to [DONE]), then the process exits 0.
import { describe, expect, it } from 'vitest';
import { hearthSync, startServe } from '../helpers/process.js';
import { tempHome } from '../helpers/server.js';

describe('graceful shutdown', () => {
  it('finishes an in-flight streaming completion before exiting', async () => {
    const home = tempHome();
    const key = hearthSync(['keys', 'create', '--entity', 'alice'], { HEARTH_HOME: home }).stdout.trim().split('\n').pop()!;
    const serve = await startServe({ HEARTH_HOME: home, HEARTH_WORKERS: 'inference:cpu' }, 60_000);
    try {
      const res = await fetch(`${serve.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'hearth/tiny-random-llama', messages: [{ role: 'user', content: 'go' }], max_tokens: 300, ignore_eos: true, stream: true }),
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      let text = '';
      let signalled = false;
      let exited: Promise<number | null> | null = null;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
        if (!signalled && text.includes('"delta"')) {
          signalled = true;
          exited = serve.stop('SIGTERM');
        }
      }
      expect(signalled).toBe(true);
      expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
      const chunks = text.split('\n\n').filter((e) => e.startsWith('data: {'));
      const finish = chunks.map((c) => JSON.parse(c.slice(6))).find((c) => c.choices?.[0]?.finish_reason);
      expect(finish.choices[0].finish_reason).toBe('length');
      expect(await exited).toBe(0);
    } finally {
      await serve.stop('SIGKILL');
    }
  }, 90_000);
});
