// Host header policy against DNS rebinding (src/api/host-check.ts).
import { describe, expect, it } from 'vitest';
import { hostAllowed, hostNameOf, hostPolicyOf } from '../../src/api/host-check.js';

describe('host check', () => {
  it('reads the name of a Host header without port, brackets or trailing dot', () => {
    expect(hostNameOf('LocalHost:8080')).toBe('localhost');
    expect(hostNameOf('[::1]:8080')).toBe('::1');
    expect(hostNameOf('hearth.internal.')).toBe('hearth.internal');
    expect(hostNameOf('10.0.0.5')).toBe('10.0.0.5');
  });

  it('by default, on a loopback HOST: loopback names and IP literals pass, other names do not', () => {
    const policy = hostPolicyOf(null, '127.0.0.1');
    for (const ok of ['127.0.0.1:8080', 'localhost:8080', '[::1]:8080', '10.1.2.3:80', 'app.localhost', undefined]) expect(hostAllowed(ok, policy), String(ok)).toBe(true);
    for (const bad of ['attacker.example:8080', 'localhost.attacker.example', 'hearth.internal']) expect(hostAllowed(bad, policy), bad).toBe(false);
  });

  it('by default, on another HOST (0.0.0.0, a LAN address) nothing is checked', () => {
    expect(hostPolicyOf(null, '0.0.0.0').names).toBeNull();
    expect(hostAllowed('anything.example', hostPolicyOf(null, '0.0.0.0'))).toBe(true);
  });

  it('HEARTH_ALLOWED_HOSTS adds names (checked whatever HOST is), and * turns the check off', () => {
    const policy = hostPolicyOf(['hearth.internal'], '0.0.0.0');
    expect(hostAllowed('hearth.internal:8080', policy)).toBe(true);
    expect(hostAllowed('localhost', policy)).toBe(true);
    expect(hostAllowed('other.internal', policy)).toBe(false);
    expect(hostPolicyOf(['*'], '127.0.0.1').names).toBeNull();
  });
});
