// A worker host's own copies of the API host's artifacts. Tasks name models, checkpoints and datasets by the API
// host's paths. HEARTH_STORAGE says what a worker does with them:
//   auto (default)  the API host's paths when this host shares its storage (same host, or a shared mount at the same
//                   path, as before: told by the API home's id, src/protocol/artifact-manifest.ts), else this host's
//                   HEARTH_HOME, fetched from the API host when missing there;
//   fetch           always this host's HEARTH_HOME, fetched when missing (what `auto` does on a host without the
//                   API host's folders; the tests use it to keep two homes apart on one machine);
//   shared          the API host's paths as given, never fetched (the folders must be mounted at the same paths).
//
// A fetch is verified file by file (worker/artifacts/artifact-client.ts) in a hidden staging folder and renamed
// into place when complete, so an artifact's local path exists only when it is whole: existence is the cache hit.
// Requests that wait for the same artifact share one fetch, in this process (a promise) and across the processes of
// one host (a lock file). Fetched artifacts are recorded with their size and last use in .artifact-cache.json and
// evicted least recently used first once they exceed the budget, never while pinned (loaded, or used by a task) by
// any process of this host (host-pins.ts).
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { artifactPath, entryPath, manifestBytes, readHomeId, relativeArtifactPath } from '../../src/protocol/artifact-manifest.js';
import { ArtifactClient } from './artifact-client.js';
import { chooseEvictions, type CachedArtifact } from './eviction.js';
import { HostPins, processAlive } from './host-pins.js';

export type StorageMode = 'auto' | 'fetch' | 'shared';

/** Where a task's paths come from: the API host's HEARTH_HOME and its id (TrainingTask.home, .homeId). */
export interface ApiHome {
  home: string;
  homeId?: string;
}

export interface LocalArtifactsOptions {
  home: string;
  mode: StorageMode;
  /** Null when HEARTH_API_URL or HEARTH_WORKER_TOKEN is unset: missing artifacts are then an error. */
  client: ArtifactClient | null;
  budgetBytes: number;
  log: (m: string) => void;
  /** The host's pin registry (default: this process's, under `<home>/.artifact-pins`). */
  pins?: HostPins;
}

/** Longest a process waits for another process of this host to finish fetching the same artifact. */
const OTHER_FETCH_WAIT_MS = 30 * 60_000;

export class LocalArtifacts {
  private readonly inflight = new Map<string, Promise<string>>();
  private readonly pins: HostPins;
  private readonly indexFile: string;

  constructor(private readonly opts: LocalArtifactsOptions) {
    this.indexFile = path.join(opts.home, '.artifact-cache.json');
    this.pins = opts.pins ?? new HostPins(path.join(opts.home, '.artifact-pins'));
  }

  /**
   * From the environment: HEARTH_HOME, HEARTH_STORAGE, HEARTH_API_URL, HEARTH_WORKER_TOKEN, HEARTH_ARTIFACT_CACHE_MB,
   * HEARTH_UPLOAD_WAIT_S, HEARTH_ARTIFACT_STALL_S.
   */
  static fromEnv(env: NodeJS.ProcessEnv, log: (m: string) => void): LocalArtifacts {
    const mode = env.HEARTH_STORAGE || 'auto';
    if (mode !== 'auto' && mode !== 'shared' && mode !== 'fetch') throw new Error(`HEARTH_STORAGE must be auto, fetch or shared, got "${mode}"`);
    const budgetMb = Number(env.HEARTH_ARTIFACT_CACHE_MB || 51_200);
    if (!Number.isFinite(budgetMb) || budgetMb <= 0) throw new Error(`HEARTH_ARTIFACT_CACHE_MB must be a positive number, got "${env.HEARTH_ARTIFACT_CACHE_MB}"`);
    const seconds = (name: string, fallback: number) => {
      const v = Number(env[name] || fallback);
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number of seconds, got "${env[name]}"`);
      return v * 1000;
    };
    const retry = { attempts: 6, baseDelayMs: 200, uploadWaitMs: seconds('HEARTH_UPLOAD_WAIT_S', 600), stallMs: seconds('HEARTH_ARTIFACT_STALL_S', 30) };
    const client = env.HEARTH_API_URL && env.HEARTH_WORKER_TOKEN ? new ArtifactClient(env.HEARTH_API_URL, env.HEARTH_WORKER_TOKEN, log, retry) : null;
    return new LocalArtifacts({ home: path.resolve(env.HEARTH_HOME || './.hearth'), mode, client, budgetBytes: budgetMb * 2 ** 20, log });
  }

  get home(): string {
    return this.opts.home;
  }

  /** Whether this host sees the API host's storage at the API host's paths (then nothing is fetched or uploaded). */
  sharesStorage(api: ApiHome): boolean {
    if (this.opts.mode !== 'auto') return this.opts.mode === 'shared';
    return !api.homeId || readHomeId(api.home) === api.homeId; // an API without home ids: as before, shared
  }

  /** This host's own path for `apiPath` (a path under the API host's home), without fetching. */
  private ownPathOf(api: ApiHome, apiPath: string): string {
    const rel = relativeArtifactPath(api.home, apiPath);
    return rel === null ? apiPath : artifactPath(this.opts.home, rel); // outside the artifact roots: used as given
  }

  /** Where this host writes the folder the API host calls `apiDir` (a checkpoint), before publishCheckpoint. */
  outputPathOf(api: ApiHome, apiDir: string): string {
    return this.sharesStorage(api) ? apiDir : this.ownPathOf(api, apiDir);
  }

  /** This host's copy of `apiPath`, fetched from the API host first when missing. */
  async localize(api: ApiHome, apiPath: string): Promise<string> {
    if (this.sharesStorage(api)) return apiPath;
    const local = this.ownPathOf(api, apiPath);
    const rel = relativeArtifactPath(api.home, apiPath);
    if (fs.existsSync(local)) {
      if (rel !== null) this.touch(rel);
      return local;
    }
    if (rel === null) return local; // outside the API host's artifact folders: the caller's error names it
    let fetching = this.inflight.get(rel);
    if (!fetching) {
      fetching = this.fetch(rel, local).finally(() => this.inflight.delete(rel));
      this.inflight.set(rel, fetching);
    }
    return fetching;
  }

  /** Keep `localPath` from eviction, by any process of this host, until the returned function is called. */
  pin(localPath: string): () => void {
    const rel = relativeArtifactPath(this.opts.home, localPath);
    return rel === null ? () => {} : this.pins.add(rel);
  }

  /**
   * Keep this host's copy of the API host's `apiPath` from eviction, before it is localized: pinned first, the copy
   * a `localize` finds or fetches cannot be evicted by another process before its user loads it.
   */
  pinFor(api: ApiHome, apiPath: string): () => void {
    return this.sharesStorage(api) ? () => {} : this.pin(this.ownPathOf(api, apiPath));
  }

  /**
   * A checkpoint this host wrote at `localDir` for the API host's `apiDir`: uploaded and verified there before the
   * job may report it (nothing to do when both are the same folder).
   */
  async publishCheckpoint(api: ApiHome, apiDir: string, localDir: string, jobId: string): Promise<void> {
    if (this.sharesStorage(api)) return;
    const rel = relativeArtifactPath(api.home, apiDir);
    if (rel === null) throw new Error(`checkpoint folder ${apiDir} is not under the API host's checkpoints folder`);
    if (!this.opts.client) throw new Error(this.noClientMessage(rel));
    const t0 = performance.now();
    const manifest = await this.opts.client.uploadCheckpoint(rel, localDir, jobId);
    this.opts.log(`uploaded checkpoint ${rel} (${manifest.files.length} files, ${manifestBytes(manifest)} bytes) in ${Math.round(performance.now() - t0)} ms; verified by the API host`);
    this.record(rel, manifestBytes(manifest));
  }

  private noClientMessage(rel: string): string {
    return `${rel} is not on this host, and it cannot fetch it: set HEARTH_API_URL and HEARTH_WORKER_TOKEN (or HEARTH_STORAGE=shared with the API host's folders mounted at the same paths)`;
  }

  private async fetch(rel: string, local: string): Promise<string> {
    const client = this.opts.client;
    if (!client) throw new Error(this.noClientMessage(rel));
    const staging = path.join(path.dirname(local), `.${path.basename(local)}.fetch`);
    fs.mkdirSync(path.dirname(local), { recursive: true });
    const release = await this.lockAcross(staging, local);
    if (!release) return local; // another process of this host fetched it meanwhile
    try {
      const t0 = performance.now();
      const manifest = await client.manifest(rel);
      const resumedBefore = client.stats.resumed;
      if (manifest.kind === 'dir') {
        fs.mkdirSync(staging, { recursive: true });
        for (const f of manifest.files) await client.download(rel, f, entryPath(staging, f.path));
      } else {
        await client.download(rel, manifest.files[0], staging);
      }
      fs.renameSync(staging, local);
      const resumed = client.stats.resumed - resumedBefore;
      this.opts.log(
        `fetched ${rel} from the API host: ${manifest.files.length} files, ${manifestBytes(manifest)} bytes, sha256 verified, in ${Math.round(performance.now() - t0)} ms${resumed ? ` (${resumed} cut transfers resumed)` : ''}`,
      );
      this.record(rel, manifestBytes(manifest));
      return local;
    } finally {
      release();
    }
  }

  /**
   * One fetch of an artifact per host: take `<staging>.lock`, or wait for the process holding it to finish (then
   * resolve null when it placed the artifact). A lock whose process is gone is taken over.
   */
  private async lockAcross(staging: string, local: string): Promise<(() => void) | null> {
    const lock = `${staging}.lock`;
    const deadline = Date.now() + OTHER_FETCH_WAIT_MS;
    while (Date.now() < deadline) {
      try {
        fs.writeFileSync(lock, String(process.pid), { flag: 'wx' });
        return () => fs.rmSync(lock, { force: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const holder = Number(fs.readFileSync(lock, 'utf8')) || 0;
      if (!holder || !processAlive(holder)) {
        fs.rmSync(lock, { force: true });
        continue;
      }
      await sleep(200);
      if (fs.existsSync(local)) return null;
    }
    throw new Error(`gave up waiting ${OTHER_FETCH_WAIT_MS / 60_000} min for another process to fetch ${local}`);
  }

  private readIndex(): Record<string, CachedArtifact> {
    try {
      return JSON.parse(fs.readFileSync(this.indexFile, 'utf8')) as Record<string, CachedArtifact>;
    } catch {
      return {};
    }
  }

  private writeIndex(index: Record<string, CachedArtifact>): void {
    const tmp = `${this.indexFile}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(index));
    fs.renameSync(tmp, this.indexFile);
  }

  private touch(rel: string): void {
    const index = this.readIndex();
    if (!index[rel]) return; // not fetched (placed by the operator, or this host is the API host): never evicted
    index[rel].lastUsedMs = Date.now();
    this.writeIndex(index);
  }

  private record(rel: string, bytes: number): void {
    const index = this.readIndex();
    index[rel] = { rel, bytes, lastUsedMs: Date.now() };
    for (const gone of chooseEvictions(Object.values(index), this.opts.budgetBytes, new Set([...this.pins.pinnedOnHost(), rel]))) {
      fs.rmSync(artifactPath(this.opts.home, gone), { recursive: true, force: true });
      this.opts.log(`evicted ${gone} (${index[gone].bytes} bytes, last used ${new Date(index[gone].lastUsedMs).toISOString()}) to stay within the artifact cache budget`);
      delete index[gone];
    }
    this.writeIndex(index);
  }
}
