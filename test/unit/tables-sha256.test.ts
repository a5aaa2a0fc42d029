import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeSha256State,
  encodeSha256State,
  ResumableSha256,
  SHA256_STATE_BYTES,
} from '../../src/tables/sha256.js';

const nativeHex = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');

describe('ResumableSha256', () => {
  it('matches known answers', () => {
    expect(new ResumableSha256().hexDigest()).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(new ResumableSha256().update(Buffer.from('abc')).hexDigest()).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
  });

  it('equals node:crypto for any split of any input, resumed through a serialized state', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(300), (bytes, cut) => {
        const split = Math.min(cut, bytes.length);
        const first = new ResumableSha256().update(bytes.subarray(0, split));
        const blob = new Uint8Array(SHA256_STATE_BYTES + 3);
        encodeSha256State(first.state(), blob, 3);
        const resumed = new ResumableSha256(decodeSha256State(blob, 3)).update(bytes.subarray(split));
        expect(resumed.hexDigest()).toBe(nativeHex(bytes));
      }),
      { numRuns: 500, seed: 1 },
    );
  });

  it('hexDigest does not disturb further updates', () => {
    const hasher = new ResumableSha256().update(Buffer.from('hello '));
    hasher.hexDigest();
    expect(hasher.update(Buffer.from('world')).hexDigest()).toBe(nativeHex(Buffer.from('hello world')));
  });
});
