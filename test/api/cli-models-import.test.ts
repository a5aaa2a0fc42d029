// `hearth models import` end to end, as a user runs it: the real CLI process imports a real GGUF model
// (../shared/models/stories260K) into the store of a running `hearth serve`, which serves it at once over
// HTTP; a broken file is refused with exit code 1 and a message, leaving nothing behind.
import { afterAll, describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { hearthSync, startServe, type ServeProcess } from '../helpers/process.js';
import { tempHome } from '../helpers/server.js';
import { sharedPath } from '../helpers/shared.js';
import { waitFor } from '../helpers/wait.js';

const KEY = `hearth_import_${crypto.randomBytes(8).toString('hex')}`;
let serve: ServeProcess | null = null;
afterAll(async () => {
  await serve?.stop('SIGTERM');
});

describe('hearth models import (CLI)', () => {
  it('imports a GGUF file that a running server then serves, and refuses a broken one', async () => {
    const gguf = sharedPath('models', 'stories260K', 'stories260K.gguf');
    const home = tempHome();
    const env = { HEARTH_HOME: home, HEARTH_API_KEY: KEY, HEARTH_ENTITY: 'alice', HEARTH_WORKERS: 'inference:cpu' };
    serve = await startServe(env);
    const call = async (method: string, p: string, body?: unknown) => {
      const res = await fetch(serve!.url + p, { method, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as any };
    };
    const ids = async () => (await call('GET', '/v1/models')).body.data.map((m: { id: string }) => m.id) as string[];
    expect(await ids()).not.toContain('karpathy/stories260K');

    const imported = hearthSync(['models', 'import', gguf, '--id', 'karpathy/stories260K'], env);
    expect(imported.status, imported.stderr).toBe(0);
    const listed = hearthSync(['models', 'list', '--json'], env);
    expect(listed.status, listed.stderr).toBe(0);
    const entry = (JSON.parse(listed.stdout) as { id: string; parameters: number }[]).find((m) => m.id === 'karpathy/stories260K');
    expect(entry).toBeDefined();
    expect(entry!.parameters).toBeGreaterThan(200_000);
    expect(entry!.parameters).toBeLessThan(400_000); // "260K"

    // The running server sees it without a restart, and its worker generates with it.
    await waitFor(async () => (await ids()).includes('karpathy/stories260K'), 'the imported model in /v1/models');
    const r = await call('POST', '/v1/completions', { model: 'karpathy/stories260K', prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.usage.completion_tokens).toBeGreaterThan(0);
    expect(r.body.choices[0].text.trim().length).toBeGreaterThan(0);
    // stories260K was trained on children's stories: greedy text from this prompt is English words.
    expect(r.body.choices[0].text).toMatch(/[a-z]{3,}/);

    const broken = path.join(home, 'broken.gguf');
    fs.writeFileSync(broken, 'not a gguf file at all');
    const refused = hearthSync(['models', 'import', broken, '--id', 'x/broken'], env);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/GGUF/);
    expect(hearthSync(['models', 'list', '--json'], env).stdout).not.toContain('x/broken');
    expect(fs.existsSync(path.join(home, 'models', 'x', 'broken'))).toBe(false);
  }, 120_000);
});
