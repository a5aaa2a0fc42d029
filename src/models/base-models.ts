// Which base models this installation has: the imported models under HEARTH_HOME/models/<publisher>/<name>/.
// A folder counts once its manifest.json exists (the importer writes it last, after an atomic rename).
import fs from 'node:fs';
import path from 'node:path';

export interface BaseModelInfo {
  id: string;
  dir: string;
  createdAt: number;
  manifest: Record<string, unknown>;
}

/**
 * How long a found model is taken as still there. Every inference request resolves its model: re-reading the
 * manifest each time cost ~0.15 ms of its latency. A model removed with `hearth models rm` can still resolve
 * for this long (its worker then answers that it could not load it); a new one is found at once.
 */
const FOUND_FRESH_MS = 1000;

export class BaseModelCatalog {
  private readonly found = new Map<string, { info: BaseModelInfo; atMs: number }>();

  constructor(private readonly modelsRoot: string) {}

  list(): BaseModelInfo[] {
    const out: BaseModelInfo[] = [];
    if (!fs.existsSync(this.modelsRoot)) return out;
    for (const publisher of fs.readdirSync(this.modelsRoot, { withFileTypes: true })) {
      if (!publisher.isDirectory() || publisher.name.startsWith('.')) continue;
      const pdir = path.join(this.modelsRoot, publisher.name);
      for (const model of fs.readdirSync(pdir, { withFileTypes: true })) {
        if (!model.isDirectory() || model.name.startsWith('.')) continue;
        const info = this.readDir(path.join(pdir, model.name), `${publisher.name}/${model.name}`);
        if (info) out.push(info);
      }
    }
    return out.sort((a, b) => a.id.localeCompare(b.id));
  }

  get(id: string): BaseModelInfo | null {
    const parts = id.split('/');
    if (parts.length !== 2 || parts.some((p) => !p || p === '.' || p === '..' || p.includes('\\'))) return null;
    const now = Date.now();
    const hit = this.found.get(id);
    if (hit && now - hit.atMs < FOUND_FRESH_MS) return hit.info;
    const info = this.readDir(path.join(this.modelsRoot, parts[0], parts[1]), id);
    if (info) this.found.set(id, { info, atMs: now });
    else this.found.delete(id);
    return info;
  }

  /** Look a model up by the part after the publisher, as the hardware endpoint names it. */
  findByName(name: string): BaseModelInfo | null {
    return this.list().find((m) => m.id.split('/')[1] === name) ?? null;
  }

  private readDir(dir: string, id: string): BaseModelInfo | null {
    const manifestFile = path.join(dir, 'manifest.json');
    try {
      const stat = fs.statSync(manifestFile);
      const manifest = JSON.parse(fs.readFileSync(manifestFile, 'utf8')) as Record<string, unknown>;
      return { id, dir, createdAt: Math.floor(stat.mtimeMs / 1000), manifest };
    } catch {
      return null;
    }
  }
}
