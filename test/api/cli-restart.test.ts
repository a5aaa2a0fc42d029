import { describe, expect, it } from 'vitest';
import { hearthSync, startServe } from '../helpers/process.js';
import { installManifestOnly, tempHome } from '../helpers/server.js';

describe('hearth CLI', () => {
  it('creates, lists and revokes keys; the key is the last stdout line and works once, then not after revoke', async () => {
    const home = tempHome();
    const created = hearthSync(['keys', 'create', '--entity', 'team-a'], { HEARTH_HOME: home });
    expect(created.status).toBe(0);
    const key = created.stdout.trim().split('\n').pop()!;
    expect(key).toMatch(/^hearth_[A-Za-z0-9_-]{30,}$/);
    const listed = hearthSync(['keys', 'list'], { HEARTH_HOME: home });
    expect(listed.stdout).toContain('team-a');
    expect(listed.stdout).not.toContain(key); // only the prefix is ever shown again

    const serve = await startServe({ HEARTH_HOME: home });
    try {
      const auth = { authorization: `Bearer ${key}` };
      expect((await fetch(`${serve.url}/v1/models`, { headers: auth })).status).toBe(200);
      const revoked = hearthSync(['keys', 'revoke', key.slice(0, 15)], { HEARTH_HOME: home });
      expect(revoked.status).toBe(0);
      expect((await fetch(`${serve.url}/v1/models`, { headers: auth })).status).toBe(401);
    } finally {
      await serve.stop();
    }
  });

  it('keeps data written before a SIGTERM after the next start, and accepts HEARTH_API_KEY', async () => {
    const home = tempHome();
    installManifestOnly(home, 'pub/base');
    const env = { HEARTH_HOME: home, HEARTH_API_KEY: 'automation-secret', HEARTH_ENTITY: 'ops' };
    const first = await startServe(env);
    const headers = { authorization: 'Bearer automation-secret', 'content-type': 'application/json' };
    const created = await fetch(`${first.url}/v1/preview/models`, {
      method: 'POST', headers, body: JSON.stringify({ project: 'p', name: 'survivor', base_model: 'pub/base' }),
    });
    expect(created.status).toBe(200);
    const model = (await created.json()) as { id: string; entity: string };
    expect(model.entity).toBe('ops');
    expect(await first.stop('SIGTERM')).toBe(0);

    const second = await startServe(env);
    try {
      const again = await fetch(`${second.url}/v1/preview/models`, {
        method: 'POST', headers, body: JSON.stringify({ project: 'p', name: 'survivor', base_model: 'pub/base', return_existing: true }),
      });
      expect(((await again.json()) as { id: string }).id).toBe(model.id);
    } finally {
      await second.stop();
    }
  });

  it('prints usage for an unknown command', () => {
    const r = hearthSync(['frobnicate'], {});
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('unknown command');
  });
});
