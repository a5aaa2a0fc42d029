// Which fetched artifacts the processes of one host are using, so that no process evicts what another has loaded.
// A host's inference and training workers share its HEARTH_HOME and its artifact cache, but not their memory: each
// process keeps its pins in a file of its own, `<home>/.artifact-pins/<pid>.json` (artifact path → count), rewritten
// whole (write, then rename) at each change, and whoever evicts reads them all. A file whose process is gone (a
// crash leaves it) is ignored and removed; a process that exits normally removes its own.
import fs from 'node:fs';
import path from 'node:path';

export class HostPins {
  private readonly counts = new Map<string, number>();
  private readonly file: string;

  /** `pid`: this process's (another only in tests, to stand for a second process of the host). */
  constructor(
    private readonly dir: string,
    private readonly pid = process.pid,
  ) {
    this.file = path.join(dir, `${pid}.json`);
    if (pid === process.pid) process.once('exit', () => fs.rmSync(this.file, { force: true }));
  }

  /** Pin `rel` (an artifact path under HEARTH_HOME) until the returned function is called (once; later calls do nothing). */
  add(rel: string): () => void {
    this.counts.set(rel, (this.counts.get(rel) ?? 0) + 1);
    this.save();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = (this.counts.get(rel) ?? 1) - 1;
      if (n > 0) this.counts.set(rel, n);
      else this.counts.delete(rel);
      this.save();
    };
  }

  /** Every artifact pinned by a live process of this host, this one included. */
  pinnedOnHost(): Set<string> {
    const out = new Set(this.counts.keys());
    let names: string[];
    try {
      names = fs.readdirSync(this.dir);
    } catch {
      return out; // no process has pinned anything yet
    }
    for (const name of names) {
      const pid = Number(/^(\d+)\.json$/.exec(name)?.[1]);
      if (!pid || pid === this.pid) continue;
      const file = path.join(this.dir, name);
      if (!processAlive(pid)) {
        fs.rmSync(file, { force: true });
        continue;
      }
      for (const rel of readPins(file)) out.add(rel);
    }
    return out;
  }

  private save(): void {
    if (this.counts.size === 0) return void fs.rmSync(this.file, { force: true });
    fs.mkdirSync(this.dir, { recursive: true });
    const tmp = `${this.file}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(Object.fromEntries(this.counts)));
    fs.renameSync(tmp, this.file);
  }
}

/** The artifact paths in a pin file; a file being replaced or unreadable counts as none (the rename is atomic). */
function readPins(file: string): string[] {
  try {
    const parsed: unknown = JSON.parse(fs.readFileSync(file, 'utf8'));
    return parsed && typeof parsed === 'object' ? Object.keys(parsed) : [];
  } catch {
    return [];
  }
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
