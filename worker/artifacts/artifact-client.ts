// The worker side of the artifact routes (src/api/plugins/artifacts.ts): manifests, downloads that resume where a
// cut left them (HTTP ranges) and are verified against the manifest's SHA-256 before anyone may use them, and
// checkpoint uploads (each file with its digest, then a commit the API verifies again).
import { describeFetchError } from './fetch-error.js';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildManifest, parseManifest, sha256OfFile, type Manifest, type ManifestFile } from '../../src/protocol/artifact-manifest.js';

/**
 * How hard a transfer tries. `attempts`: failed tries in a row that made no progress before it is given up (each
 * resumes where the last stopped; a try that brought the file further starts the count again, so a long transfer over
 * a flaky link is not given up after a few cuts). `baseDelayMs`: the first wait between tries (doubling, at most 5 s).
 */
export interface RetryPolicy {
  attempts: number;
  baseDelayMs: number;
  /**
   * A checkpoint upload keeps trying this long after its first failure however many tries that takes: the API host
   * may be restarting while the job's worker, reporting through Redis, carries on (default 10 minutes).
   */
  uploadWaitMs?: number;
  /** A download that receives nothing for this long is cut and resumed (default 30 s). */
  stallMs?: number;
}
const DEFAULT_RETRY: RetryPolicy = { attempts: 6, baseDelayMs: 200 };
const DEFAULT_UPLOAD_WAIT_MS = 10 * 60_000;
const DEFAULT_STALL_MS = 30_000;
/** Tries of one download in all, progress or not: a peer that trickles a byte per try still ends. */
const MAX_TRIES_FACTOR = 20;

/** The API refused (4xx): trying again will not help. */
export class ArtifactRefusedError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** A downloaded file does not match its manifest: it is deleted, never used. */
export class ArtifactVerifyError extends Error {}

export interface TransferStats {
  /** Range requests that continued a cut transfer. */
  resumed: number;
  bytes: number;
}

export class ArtifactClient {
  readonly stats: TransferStats = { resumed: 0, bytes: 0 };

  constructor(
    private readonly apiUrl: string,
    private readonly token: string,
    private readonly log: (m: string) => void = () => {},
    private readonly retry: RetryPolicy = DEFAULT_RETRY,
  ) {}

  private url(route: string, query: Record<string, string>): string {
    return `${this.apiUrl.replace(/\/+$/, '')}/v1/worker/artifacts/${route}?${new URLSearchParams(query)}`;
  }

  private async request(url: string, init: RequestInit = {}): Promise<Response> {
    let res: Response;
    try {
      res = await fetch(url, { ...init, headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${this.token}` } });
    } catch (err) {
      // "fetch failed" says nothing: name the cause (refused, DNS, TLS, timeout) and what to check.
      throw new Error(describeFetchError(err, url), { cause: err });
    }
    if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) {
      const body = await res.text().catch(() => '');
      throw new ArtifactRefusedError(res.status, `API refused ${init.method ?? 'GET'} ${url.split('?')[0].split('/').pop()} (${res.status}): ${body.slice(0, 300)}`);
    }
    return res;
  }

  /**
   * Retry `op` on network errors and 5xx, not on refusals: `attempts` tries in a row without progress (`progressed`
   * says whether the last try brought the transfer further), and for at least `waitMs` since the first failure.
   */
  private async retrying<T>(what: string, op: () => Promise<T>, opts: { progressed?: () => boolean; waitMs?: number } = {}): Promise<T> {
    const { attempts, baseDelayMs } = this.retry;
    let failedInARow = 0;
    let firstFailureMs = 0;
    for (let tries = 1; ; tries++) {
      try {
        return await op();
      } catch (err) {
        if (err instanceof ArtifactRefusedError || err instanceof ArtifactVerifyError) throw err;
        failedInARow = opts.progressed?.() ? 1 : failedInARow + 1;
        firstFailureMs ||= Date.now();
        const waited = Date.now() - firstFailureMs;
        const waitedEnough = waited >= (opts.waitMs ?? 0);
        if (waitedEnough && (failedInARow >= attempts || tries >= attempts * MAX_TRIES_FACTOR)) {
          if (opts.waitMs) throw new Error(`${what}: gave up after ${tries} tries in ${Math.round(waited / 1000)} s: ${(err as Error).message}`);
          throw err;
        }
        const left = opts.waitMs ? `try ${tries}, ${Math.round(waited / 1000)} s of the ${Math.round(opts.waitMs / 1000)} s it waits for the API host` : `${failedInARow}/${attempts - 1}`;
        this.log(`${what}: ${(err as Error).message}; retrying (${left})`);
        await sleep(Math.min(5000, baseDelayMs * 2 ** (Math.min(failedInARow, 16) - 1)));
      }
    }
  }

  /** The artifact's manifest, checked (a malformed or forged one is refused at once, not retried). */
  async manifest(rel: string): Promise<Manifest> {
    const raw = await this.retrying(`manifest of ${rel}`, async () => {
      const res = await this.request(this.url('manifest', { path: rel }));
      if (!res.ok) throw new Error(`manifest of ${rel}: HTTP ${res.status}`);
      return (await res.json()) as unknown;
    });
    return parseManifest(raw, rel);
  }

  /**
   * Download `file` of artifact `rel` to `dest`, continuing a partial `dest` a cut left, and verify it. A file that
   * fails verification is deleted and fetched once more from the start; a second mismatch throws.
   */
  async download(rel: string, file: ManifestFile, dest: string): Promise<void> {
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    for (let round = 0; round < 2; round++) {
      // Progress: the file on disk grew past where the previous try had left it.
      let highWater = bytesOnDisk(dest);
      const progressed = () => {
        const now = bytesOnDisk(dest);
        const grew = now > highWater;
        highWater = Math.max(highWater, now);
        return grew;
      };
      await this.retrying(`download of ${rel}/${file.path}`, () => this.continueDownload(rel, file, dest), { progressed });
      const sha256 = await sha256OfFile(dest);
      if (sha256 === file.sha256) return;
      fs.rmSync(dest, { force: true });
      this.log(`${rel}/${file.path}: sha256 ${sha256} is not the manifest's ${file.sha256}; deleted${round === 0 ? ', fetching it again' : ''}`);
    }
    throw new ArtifactVerifyError(`${rel}/${file.path} does not match its manifest's sha256 after two downloads; refused`);
  }

  private async continueDownload(rel: string, file: ManifestFile, dest: string): Promise<void> {
    let have = bytesOnDisk(dest);
    if (have > file.size) (fs.rmSync(dest), (have = 0));
    if (have === file.size) return;
    const ctrl = new AbortController();
    const res = await this.request(this.url('file', { path: rel, file: file.path }), { headers: have ? { range: `bytes=${have}-` } : {}, signal: ctrl.signal });
    if (res.status !== 200 && res.status !== 206) throw new Error(`HTTP ${res.status}`);
    if (have && res.status === 206) this.stats.resumed++;
    const out = fs.createWriteStream(dest, { flags: res.status === 206 ? 'a' : 'w' });
    let stall: NodeJS.Timeout | undefined;
    const stallMs = this.retry.stallMs ?? DEFAULT_STALL_MS;
    const arm = () => {
      clearTimeout(stall);
      stall = setTimeout(() => ctrl.abort(new Error(`no data for ${stallMs / 1000} s`)), stallMs);
    };
    try {
      arm();
      for await (const chunk of Readable.fromWeb(res.body as never)) {
        arm();
        this.stats.bytes += (chunk as Buffer).length;
        if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
      }
    } finally {
      clearTimeout(stall);
      await new Promise<void>((r) => out.end(r));
    }
    const got = fs.statSync(dest).size;
    if (got !== file.size) throw new Error(`transfer ended at ${got} of ${file.size} bytes`);
  }

  /** Upload training job `jobId`'s finished checkpoint folder `dir` as artifact `rel`; the API verifies and commits it. */
  async uploadCheckpoint(rel: string, dir: string, jobId: string): Promise<Manifest> {
    const manifest = await buildManifest(dir, rel);
    const waitMs = this.retry.uploadWaitMs ?? DEFAULT_UPLOAD_WAIT_MS;
    for (const f of manifest.files) {
      await this.retrying(`upload of ${rel}/${f.path}`, async () => {
        // Streamed from disk: a full fine-tune's checkpoint is the model's size.
        const body = Readable.toWeb(fs.createReadStream(path.join(dir, ...f.path.split('/')))) as ReadableStream;
        const res = await this.request(this.url('file', { path: rel, file: f.path, sha256: f.sha256, job: jobId }), {
          method: 'PUT', body, duplex: 'half', headers: { 'content-type': 'application/octet-stream' },
        } as RequestInit);
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
      }, { waitMs });
    }
    await this.retrying(`commit of ${rel}`, async () => {
      const res = await this.request(this.url('commit', { path: rel, job: jobId }), { method: 'POST', body: JSON.stringify(manifest), headers: { 'content-type': 'application/json' } });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
    }, { waitMs });
    return manifest;
  }
}

/** A stable short name of a manifest (its files and digests), for logs and cache records. */
export const manifestDigest = (m: Manifest) => crypto.createHash('sha256').update(JSON.stringify(m.files)).digest('hex').slice(0, 16);

/** How much of a download is on disk (0 before its first byte). */
function bytesOnDisk(file: string): number {
  return fs.existsSync(file) ? fs.statSync(file).size : 0;
}
