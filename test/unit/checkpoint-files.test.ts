// Checkpoint files put in another folder (src/runtime/checkpoint-files.ts): one file under two names where the
// filesystem has hard links, the bytes copied where it has not, and a folder placed whole (with bytes written beside).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { linkOrCopy, placeCheckpointFiles } from '../../src/runtime/checkpoint-files.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-checkpoint-files-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

function checkpoint(name: string): string {
  const dir = path.join(root, name);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'adapter_model.safetensors'), Buffer.from([1, 2, 3, 4]));
  fs.writeFileSync(path.join(dir, 'adapter_config.json'), '{"r": 8}\n');
  fs.writeFileSync(path.join(dir, 'optimizer.safetensors'), Buffer.from([5, 6]));
  return dir;
}

describe('checkpoint files', () => {
  it('links where the filesystem can: no bytes written, and removing one name leaves the other', () => {
    const from = checkpoint('a');
    const to = path.join(root, 'a-linked.safetensors');
    linkOrCopy(path.join(from, 'adapter_model.safetensors'), to);
    expect(fs.statSync(to).ino).toBe(fs.statSync(path.join(from, 'adapter_model.safetensors')).ino);
    fs.rmSync(path.join(from, 'adapter_model.safetensors'));
    expect([...fs.readFileSync(to)]).toEqual([1, 2, 3, 4]);
  });

  it('copies the bytes where linking fails (another filesystem)', () => {
    const from = checkpoint('b');
    vi.spyOn(fs, 'linkSync').mockImplementation(() => {
      throw Object.assign(new Error('EXDEV: cross-device link not permitted'), { code: 'EXDEV' });
    });
    const to = path.join(root, 'b-copied.safetensors');
    linkOrCopy(path.join(from, 'adapter_model.safetensors'), to);
    expect(fs.statSync(to).ino).not.toBe(fs.statSync(path.join(from, 'adapter_model.safetensors')).ino);
    expect([...fs.readFileSync(to)]).toEqual([1, 2, 3, 4]);
  });

  it('places the named files only, replacing what an earlier try left, and leaves no staging folder', () => {
    const from = checkpoint('c');
    const to = path.join(root, 'c-placed');
    fs.mkdirSync(to);
    fs.writeFileSync(path.join(to, 'left-over'), 'x');
    placeCheckpointFiles(from, to, ['adapter_config.json', 'adapter_model.safetensors']);
    expect(fs.readdirSync(to).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    expect(fs.existsSync(`${to}.staging`)).toBe(false);
    // Bytes made elsewhere (a saved state's moments) go in beside the linked files, through a staging folder named.
    const withMoments = path.join(root, 'c-with-moments');
    placeCheckpointFiles(from, withMoments, ['adapter_model.safetensors'], { written: { 'optimizer.safetensors': Buffer.from([9]) }, staging: path.join(root, '.c-staging') });
    expect(fs.readdirSync(withMoments).sort()).toEqual(['adapter_model.safetensors', 'optimizer.safetensors']);
    expect([...fs.readFileSync(path.join(withMoments, 'optimizer.safetensors'))]).toEqual([9]);
    expect(fs.existsSync(path.join(root, '.c-staging'))).toBe(false);
    // A file that is not there fails the placement and leaves the folder as it was.
    expect(() => placeCheckpointFiles(from, to, ['adapter_model.safetensors', 'missing.json'])).toThrow(/missing\.json/);
    expect(fs.readdirSync(to).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
  });
});
