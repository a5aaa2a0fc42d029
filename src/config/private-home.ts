// HEARTH_HOME holds API key hashes, every tenant's datasets, tables, trajectories and checkpoints: other local
// users have no business reading it. Processes that write there create folders 0700 and files 0600 (umask 077,
// inherited by the workers they start), and an existing home folder is narrowed to 0700 at start.
import fs from 'node:fs';

/** Call first thing in a command that writes under `home`. */
export function makeHomePrivate(home: string): void {
  try {
    process.umask(0o077);
  } catch {
    // Worker threads cannot change the umask (tests that run commands in-process); the folder mode below still holds.
  }
  fs.mkdirSync(home, { recursive: true, mode: 0o700 });
  try {
    fs.chmodSync(home, 0o700);
  } catch {
    // Not ours to change (a mounted volume owned by another user): leave it as its owner set it.
  }
}
