// Every `hearth` command answers --help with its usage and exits 0, without doing its work: `hearth serve
// --help` must not open a store or start a server (it used to start one).
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { hearthSync } from '../helpers/process.js';
import { tempHome } from '../helpers/server.js';

describe('hearth <command> --help', () => {
  it('prints each command\'s usage, exits 0 and leaves HEARTH_HOME untouched', () => {
    const home = path.join(tempHome(), 'home');
    const cases = ['serve', 'keys', 'worker', 'models', 'generate', 'bench'].map((c) => [c, '--help']).concat([['serve', '-h']]);
    {
      for (const [command, flag] of cases) {
        const r = hearthSync([command, flag], { HEARTH_HOME: home, PORT: '1' });
        expect(r.status, `${command} ${flag}: ${r.stderr}`).toBe(0);
        expect(r.stdout, command).toMatch(new RegExp(`^usage:(\\s+hearth ${command}\\b|\\n)`));
        expect(r.stdout, command).toContain(`hearth ${command}`);
      }
    }
    // `hearth help serve` says the same; subcommand positions work too.
    expect(hearthSync(['help', 'serve'], { HEARTH_HOME: home }).stdout).toBe(hearthSync(['serve', '--help'], { HEARTH_HOME: home }).stdout);
    expect(hearthSync(['keys', 'create', '--help'], { HEARTH_HOME: home }).stdout).toContain('hearth keys revoke <prefix>');
    expect(fs.existsSync(home)).toBe(false);
  });

  it('the top-level usage points at per-command help', () => {
    const r = hearthSync(['--help'], {});
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('"hearth <command> --help" tells more.');
  });
});
