// Artifacts a worker host may fetch from the API host (base models, checkpoints, datasets) and the manifests that
// address them by content: every file of the artifact with its size and SHA-256. Shared by the API's artifact routes
// (src/api/plugins/artifacts.ts) and the worker's fetcher (worker/artifacts/), so both read paths the same way.
//
// An artifact is named by its path relative to HEARTH_HOME ("models/hearth/tiny-random-llama",
// "checkpoints/<model id>/step-3", "datasets/<entity>/<file>.jsonl"): the same on every host, whatever each host's
// HEARTH_HOME is. A path from the network is never trusted: it is checked lexically here before any file is opened.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

/** The folders of HEARTH_HOME artifacts live in; `uploadable`: a worker may write there (its checkpoints). */
export const ARTIFACT_ROOTS = ['models', 'checkpoints', 'datasets'] as const;
export const UPLOADABLE_ROOTS = ['checkpoints'] as const;

export const ManifestFile = z.object({
  path: z.string().min(1).max(1024),
  size: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});
export type ManifestFile = z.infer<typeof ManifestFile>;

export const Manifest = z.object({
  /** The artifact's path under HEARTH_HOME. */
  path: z.string(),
  /** 'dir': files are relative to the folder; 'file': one entry, named by the file's base name. */
  kind: z.enum(['dir', 'file']),
  files: z.array(ManifestFile).max(10_000),
});
export type Manifest = z.infer<typeof Manifest>;

export class ArtifactPathError extends Error {}

/**
 * Where training job `jobId`'s upload to the folder `abs` is staged on the API host until its commit: a hidden
 * sibling, so it never shows as an artifact or a step (src/api/plugins/artifacts.ts), one per job, so a stale
 * worker's upload never mixes with the step's next job's; all are cleared with the step folder when a job starts.
 */
export const uploadStagingOf = (abs: string, jobId: string) => path.join(path.dirname(abs), `.${path.basename(abs)}.upload-${jobId}`);

/** Remove every upload staging folder of the step folder `abs` (whatever job left it). */
export function clearUploadStaging(abs: string): void {
  const prefix = `.${path.basename(abs)}.upload-`;
  const parent = path.dirname(abs);
  if (!fs.existsSync(parent)) return;
  for (const name of fs.readdirSync(parent)) if (name.startsWith(prefix)) fs.rmSync(path.join(parent, name), { recursive: true, force: true });
}

/**
 * Check a relative path from the network: forward slashes, no empty, `.` or `..` segment, no absolute path, no
 * backslash or NUL, no hidden (dot) name (temporary and staging folders). Returns its segments.
 */
export function safeSegments(rel: string): string[] {
  if (typeof rel !== 'string' || rel.length === 0 || rel.length > 1024) throw new ArtifactPathError('empty or too long path');
  if (rel.includes('\\') || rel.includes('\0')) throw new ArtifactPathError(`path ${JSON.stringify(rel)} has a backslash or NUL`);
  if (rel.startsWith('/') || /^[A-Za-z]:/.test(rel)) throw new ArtifactPathError(`path ${JSON.stringify(rel)} is absolute`);
  const segments = rel.split('/');
  for (const s of segments) {
    if (s === '' || s === '.' || s === '..') throw new ArtifactPathError(`path ${JSON.stringify(rel)} has an empty, . or .. segment`);
    if (s.startsWith('.')) throw new ArtifactPathError(`path ${JSON.stringify(rel)} names a hidden file or folder`);
  }
  return segments;
}

/**
 * The absolute path of artifact `rel` under `home`, refusing anything outside the artifact roots (or outside the
 * uploadable ones when `forUpload`).
 */
export function artifactPath(home: string, rel: string, opts: { forUpload?: boolean } = {}): string {
  const segments = safeSegments(rel);
  const roots: readonly string[] = opts.forUpload ? UPLOADABLE_ROOTS : ARTIFACT_ROOTS;
  if (segments.length < 2 || !roots.includes(segments[0])) {
    throw new ArtifactPathError(`path ${JSON.stringify(rel)} is not under ${roots.map((r) => `${r}/`).join(', ')}`);
  }
  const abs = path.resolve(home, ...segments);
  if (!abs.startsWith(path.resolve(home) + path.sep)) throw new ArtifactPathError(`path ${JSON.stringify(rel)} leaves the home folder`);
  return abs;
}

/** Where a manifest entry goes inside the artifact's local folder; refuses entries that would leave it. */
export function entryPath(artifactDir: string, entry: string): string {
  const abs = path.resolve(artifactDir, ...safeSegments(entry));
  if (!abs.startsWith(path.resolve(artifactDir) + path.sep)) throw new ArtifactPathError(`manifest entry ${JSON.stringify(entry)} leaves the artifact`);
  return abs;
}

/** `abs` as an artifact path relative to `home`, or null when it is not under one of the artifact roots. */
export function relativeArtifactPath(home: string, abs: string): string | null {
  const rel = path.relative(path.resolve(home), path.resolve(abs)).split(path.sep).join('/');
  try {
    artifactPath(home, rel);
    return rel;
  } catch {
    return null;
  }
}

export async function sha256OfFile(file: string): Promise<string> {
  const hash = crypto.createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Files of a folder, recursively, as forward-slash paths relative to it, sorted; hidden names skipped. */
function listFiles(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(dir, prefix), { withFileTypes: true })) {
    if (e.name.startsWith('.')) continue;
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    const isDir = e.isDirectory() || (e.isSymbolicLink() && fs.statSync(path.join(dir, rel)).isDirectory());
    if (isDir) out.push(...listFiles(dir, rel));
    else out.push(rel);
  }
  return out.sort();
}

/**
 * The manifest of the file or folder at `abs` (artifact path `rel`). Hashing a multi-GB model takes seconds, so
 * digests are remembered by (path, size, mtime) in `cache`.
 */
export async function buildManifest(abs: string, rel: string, cache?: Map<string, { size: number; mtimeMs: number; sha256: string }>): Promise<Manifest> {
  const stat = fs.statSync(abs);
  const kind = stat.isDirectory() ? 'dir' : 'file';
  const names = kind === 'dir' ? listFiles(abs) : [path.basename(abs)];
  const files: ManifestFile[] = [];
  for (const name of names) {
    const file = kind === 'dir' ? path.join(abs, ...name.split('/')) : abs;
    const st = fs.statSync(file);
    const known = cache?.get(file);
    let sha256 = known && known.size === st.size && known.mtimeMs === st.mtimeMs ? known.sha256 : null;
    if (!sha256) {
      sha256 = await sha256OfFile(file);
      cache?.set(file, { size: st.size, mtimeMs: st.mtimeMs, sha256 });
    }
    files.push({ path: name, size: st.size, sha256 });
  }
  return { path: rel, kind, files };
}

/** A received manifest, checked: schema, every entry path safe, no duplicates; a 'file' manifest has one entry. */
export function parseManifest(raw: unknown, expectedPath: string): Manifest {
  const m = Manifest.parse(raw);
  if (m.path !== expectedPath) throw new ArtifactPathError(`manifest is for ${JSON.stringify(m.path)}, not ${JSON.stringify(expectedPath)}`);
  const seen = new Set<string>();
  for (const f of m.files) {
    safeSegments(f.path);
    if (seen.has(f.path)) throw new ArtifactPathError(`manifest lists ${JSON.stringify(f.path)} twice`);
    seen.add(f.path);
  }
  if (m.kind === 'file' && m.files.length !== 1) throw new ArtifactPathError('a file manifest must list exactly one file');
  return m;
}

export const manifestBytes = (m: Manifest) => m.files.reduce((a, f) => a + f.size, 0);

/**
 * The id of a HEARTH_HOME: a random id the API host keeps in `<home>/.hearth-home-id` and sends with each task. A
 * worker host that reads the same id at the same path shares the API host's storage (same host, or a shared mount);
 * one that does not keeps its own copies, fetched and uploaded over the artifact routes.
 */
export const HOME_ID_FILE = '.hearth-home-id';

export function ensureHomeId(home: string): string {
  const file = path.join(home, HOME_ID_FILE);
  const existing = readHomeId(home);
  if (existing) return existing;
  fs.mkdirSync(home, { recursive: true });
  const id = crypto.randomBytes(16).toString('hex');
  try {
    fs.writeFileSync(file, id, { flag: 'wx' });
    return id;
  } catch {
    return readHomeId(home) ?? id; // another process wrote it first
  }
}

export function readHomeId(home: string): string | null {
  try {
    return fs.readFileSync(path.join(home, HOME_ID_FILE), 'utf8').trim() || null;
  } catch {
    return null;
  }
}
