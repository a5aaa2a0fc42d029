// A checkpoint folder's files, as the trainer writes them (worker/training/checkpoint.ts), and how they are put in
// another folder (a publication, a saved state, a run's initial version). The trainer writes a checkpoint's files
// once, into a new folder, and nothing changes them afterwards (a new version is a new folder; a file goes only with
// rm), so two folders can hold the same file: a hard link, where the filesystem allows one, costs no bytes. A
// published 8B adapter at rank 8 is 84 MB that ART's loop would otherwise write again at every step.
import fs from 'node:fs';
import path from 'node:path';

export const ADAPTER_CONFIG_FILE = 'adapter_config.json';
export const ADAPTER_WEIGHTS_FILE = 'adapter_model.safetensors';
export const FULL_WEIGHTS_FILE = 'model.safetensors';

/** `to` (which must not exist) holds `from`'s bytes: a hard link on the same filesystem, else a copy. */
export function linkOrCopy(from: string, to: string): void {
  try {
    fs.linkSync(from, to);
  } catch {
    // Another filesystem (EXDEV), or one without hard links: the bytes themselves.
    fs.copyFileSync(from, to);
  }
}

/**
 * Put `files` of `fromDir` (and the bytes of `written`, by file name) into `toDir` whole or not at all: into a
 * staging folder first, which then replaces `toDir` (a folder there is what an earlier try left: no row names it yet).
 */
export function placeCheckpointFiles(
  fromDir: string, toDir: string, files: readonly string[],
  opts: { written?: Record<string, Uint8Array>; staging?: string } = {},
): void {
  const staging = opts.staging ?? `${toDir}.staging`;
  fs.rmSync(staging, { recursive: true, force: true });
  fs.mkdirSync(staging, { recursive: true });
  for (const file of files) linkOrCopy(path.join(fromDir, file), path.join(staging, file));
  for (const [file, bytes] of Object.entries(opts.written ?? {})) fs.writeFileSync(path.join(staging, file), bytes);
  fs.rmSync(toDir, { recursive: true, force: true });
  fs.renameSync(staging, toDir);
}
