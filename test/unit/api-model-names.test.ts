import { describe, expect, it } from 'vitest';
import { parseModelName } from '../../src/services/model-names.js';

describe('inference model names', () => {
  it('parses base ids and trained names with every accepted suffix', () => {
    expect(parseModelName('hearth/tiny-random-llama')).toEqual({ kind: 'base', id: 'hearth/tiny-random-llama' });
    expect(parseModelName('wandb-artifact:///team/proj/agent-001')).toEqual({ kind: 'trained', entity: 'team', project: 'proj', name: 'agent-001', step: 'latest' });
    expect(parseModelName('wandb-artifact://team/proj/agent-001:step25')).toMatchObject({ step: 25 });
    expect(parseModelName('wandb-artifact:///team/proj/agent-001:v3')).toMatchObject({ step: 3 });
    expect(parseModelName('wandb-artifact:///team/proj/agent-001:latest')).toMatchObject({ step: 'latest' });
  });
  it('rejects malformed names with a message', () => {
    for (const bad of ['wandb-artifact:///team/proj', 'wandb-artifact:///t/p/n:banana', '../etc/passwd', 'a/b/c', '', 'x']) {
      expect(parseModelName(bad)).toHaveProperty('error');
    }
  });
});
