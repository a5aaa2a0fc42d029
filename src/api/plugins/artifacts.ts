// The artifact routes worker hosts without a shared filesystem use: read the manifest of a model, checkpoint or
// dataset, download its files (HTTP ranges, so a cut transfer resumes), and upload the checkpoint a training job
// wrote (verified, then renamed into place in one step). Only a worker credential (HEARTH_WORKER_TOKEN) opens them;
// it opens nothing else, and a user's API key is refused here, so no key reads another entity's checkpoint this way.
//
//   GET  /v1/worker/artifacts/manifest?path=<artifact>
//   GET  /v1/worker/artifacts/file?path=<artifact>&file=<entry>          (Range: bytes=N- or N-M → 206)
//   PUT  /v1/worker/artifacts/file?path=<checkpoint>&file=<entry>&sha256=<hex>&job=<id>   (application/octet-stream)
//   POST /v1/worker/artifacts/commit?path=<checkpoint>&job=<id>          (body: the manifest)
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform, type Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HttpError } from '../errors.js';
import { ArtifactPathError, artifactPath, buildManifest, entryPath, parseManifest, uploadStagingOf, type Manifest } from '../../protocol/artifact-manifest.js';
import { hearthMetrics } from '../../metrics/metrics.js';

export interface ArtifactRoutesOptions {
  home: string;
  /** HEARTH_WORKER_TOKEN; null: the routes answer 503 saying how to turn them on. */
  workerToken: string | null;
  /**
   * The model of training job `jobId` when the job is running, else null: a checkpoint upload names its job, and one
   * from a worker whose job was already failed (presumed lost in a partition, back now) is refused.
   */
  runningJob: (jobId: string) => { modelId: string } | null;
  /** Largest file one upload may write, in bytes (HEARTH_WORKER_UPLOAD_LIMIT); default: no limit. */
  uploadLimit?: number;
}

const digestOf = (s: string) => crypto.createHash('sha256').update(s).digest();


/** `bytes=N-` or `bytes=N-M` of a file of `size` bytes → [start, end] inclusive; null: no usable range. */
export function parseRange(header: string | undefined, size: number): [number, number] | null | 'unsatisfiable' {
  if (!header) return null;
  const m = /^bytes=(\d+)-(\d*)$/.exec(header.trim());
  if (!m) return null; // several ranges or a suffix range: answer the whole file, as RFC 9110 allows
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || end < start) return 'unsatisfiable';
  return [start, end];
}

export function registerArtifactRoutes(app: FastifyInstance, opts: ArtifactRoutesOptions): void {
  const expected = opts.workerToken ? digestOf(opts.workerToken) : null;
  const digests = new Map<string, { size: number; mtimeMs: number; sha256: string }>();

  const refuse = (request: FastifyRequest, status: number, message: string, reason: string): never => {
    hearthMetrics.artifactRefusals.inc({ reason });
    request.log.warn({ url: request.url, reason }, `artifact request refused: ${message}`);
    throw new HttpError(status, message);
  };

  const authenticate = (request: FastifyRequest) => {
    if (!expected) throw new HttpError(503, 'worker artifact routes are off on this API host: set HEARTH_WORKER_TOKEN here and on the worker hosts');
    const header = request.headers.authorization ?? '';
    const [scheme, value] = header.split(/\s+/, 2);
    if (scheme?.toLowerCase() !== 'bearer' || !value) refuse(request, 401, 'missing worker credential: send "Authorization: Bearer <HEARTH_WORKER_TOKEN>"', 'no_credential');
    if (!crypto.timingSafeEqual(digestOf(value), expected)) {
      refuse(request, 403, 'these routes take the worker credential (HEARTH_WORKER_TOKEN), not an API key', 'not_worker_credential');
    }
  };

  const resolve = (request: FastifyRequest, rel: unknown, forUpload = false): string => {
    try {
      return artifactPath(opts.home, String(rel ?? ''), { forUpload });
    } catch (err) {
      if (err instanceof ArtifactPathError) refuse(request, 400, err.message, 'bad_path');
      throw err;
    }
  };

  const entry = (request: FastifyRequest, dir: string, name: unknown): string => {
    try {
      return entryPath(dir, String(name ?? ''));
    } catch (err) {
      if (err instanceof ArtifactPathError) refuse(request, 400, err.message, 'bad_path');
      throw err;
    }
  };

  /** The upload's job must be running and own the checkpoint's model folder (checkpoints/<model id>/step-N). */
  const uploadingJob = (request: FastifyRequest, rel: string, jobId: unknown): string => {
    if (typeof jobId !== 'string' || !/^[A-Za-z0-9-]{1,64}$/.test(jobId)) throw new HttpError(422, 'job must name the training job the checkpoint belongs to');
    const job = opts.runningJob(jobId);
    if (!job || rel.split('/')[1] !== job.modelId) {
      refuse(request, 409, `training job ${jobId} is not running or does not train this model: its checkpoint is not taken (was its worker presumed lost?)`, 'stale_upload');
    }
    return jobId;
  };

  app.register(async (scope) => {
    // Uploads stream to disk as they arrive: no body limit, no buffering of a multi-GB checkpoint.
    scope.addContentTypeParser('application/octet-stream', (_req, payload, done) => done(null, payload));
    scope.addHook('onRequest', async (request) => authenticate(request));
    const config = { errorStyle: 'detail' as const };

    scope.get('/v1/worker/artifacts/manifest', { config }, async (request) => {
      const q = request.query as Record<string, string | undefined>;
      const abs = resolve(request, q.path);
      if (!fs.existsSync(abs)) throw new HttpError(404, `no artifact ${q.path} on the API host`);
      return buildManifest(abs, q.path!, digests);
    });

    scope.get('/v1/worker/artifacts/file', { config }, async (request, reply: FastifyReply) => {
      const q = request.query as Record<string, string | undefined>;
      const abs = resolve(request, q.path);
      if (!fs.existsSync(abs)) throw new HttpError(404, `no artifact ${q.path} on the API host`);
      const file = fs.statSync(abs).isDirectory() ? entry(request, abs, q.file) : abs;
      if (!fs.statSync(abs).isDirectory() && q.file !== path.basename(abs)) throw new HttpError(404, `artifact ${q.path} is one file, ${path.basename(abs)}`);
      if (!fs.existsSync(file) || !fs.statSync(file).isFile()) throw new HttpError(404, `no file ${q.file} in ${q.path}`);
      const size = fs.statSync(file).size;
      const range = parseRange(request.headers.range, size);
      reply.header('accept-ranges', 'bytes').type('application/octet-stream');
      if (range === 'unsatisfiable') {
        reply.header('content-range', `bytes */${size}`);
        throw new HttpError(416, `range ${request.headers.range} is outside the file's ${size} bytes`);
      }
      const [start, end] = range ?? [0, size - 1];
      reply.header('content-length', String(Math.max(0, end - start + 1)));
      if (range) reply.code(206).header('content-range', `bytes ${start}-${end}/${size}`);
      hearthMetrics.artifactBytesServed.inc(Math.max(0, end - start + 1));
      return reply.send(size === 0 ? '' : fs.createReadStream(file, { start, end }));
    });

    scope.put('/v1/worker/artifacts/file', { config }, async (request) => {
      const q = request.query as Record<string, string | undefined>;
      const abs = resolve(request, q.path, true);
      if (!/^[0-9a-f]{64}$/.test(q.sha256 ?? '')) throw new HttpError(400, 'sha256 must be 64 lowercase hex digits');
      const jobId = uploadingJob(request, q.path!, q.job);
      if (fs.existsSync(abs)) throw new HttpError(409, `checkpoint ${q.path} already exists on the API host`);
      const staging = uploadStagingOf(abs, jobId);
      const dest = entry(request, staging, q.file);
      fs.mkdirSync(path.dirname(dest), { recursive: true });
      // The uploads route has no body limit (multi-GB checkpoints stream to disk), so the bytes are counted here.
      const limit = opts.uploadLimit ?? Number.POSITIVE_INFINITY;
      const tooLarge = () => new HttpError(413, `upload of ${q.file} exceeds the limit of ${limit} bytes (HEARTH_WORKER_UPLOAD_LIMIT on the API host)`, {}, 'request_too_large');
      if (Number(request.headers['content-length'] ?? 0) > limit) throw tooLarge();
      const hash = crypto.createHash('sha256');
      let received = 0;
      const hasher = new Transform({
        transform: (chunk: Buffer, _enc, cb) => {
          received += chunk.length;
          if (received > limit) return cb(tooLarge());
          hash.update(chunk);
          cb(null, chunk);
        },
      });
      try {
        await pipeline(request.body as Readable, hasher, fs.createWriteStream(dest));
      } catch (err) {
        fs.rmSync(dest, { force: true });
        throw err;
      }
      const got = hash.digest('hex');
      if (got !== q.sha256) {
        fs.rmSync(dest, { force: true });
        refuse(request, 422, `upload of ${q.file} for ${q.path}: sha256 ${got} is not the announced ${q.sha256} (truncated or corrupted); sent again, it may pass`, 'digest_mismatch');
      }
      return { path: q.path, file: q.file, sha256: got, size: fs.statSync(dest).size };
    });

    scope.post('/v1/worker/artifacts/commit', { config }, async (request) => {
      const q = request.query as Record<string, string | undefined>;
      const abs = resolve(request, q.path, true);
      const jobId = uploadingJob(request, q.path!, q.job);
      let manifest: Manifest;
      try {
        manifest = parseManifest(request.body, q.path!);
      } catch (err) {
        refuse(request, 422, `bad manifest: ${(err as Error).message}`, 'bad_manifest');
        throw err;
      }
      if (manifest.kind !== 'dir') throw new HttpError(422, 'a checkpoint is a folder');
      if (fs.existsSync(abs)) {
        // A commit retried after its answer was lost: the same files are already in place.
        const there = await buildManifest(abs, q.path!, digests);
        if (JSON.stringify(there.files) === JSON.stringify([...manifest.files].sort((a, b) => a.path.localeCompare(b.path)))) return { path: q.path, committed: true };
        throw new HttpError(409, `checkpoint ${q.path} already exists on the API host with other contents`);
      }
      const staging = uploadStagingOf(abs, jobId);
      if (!fs.existsSync(staging)) throw new HttpError(409, `nothing uploaded for ${q.path}`);
      const staged = await buildManifest(staging, q.path!);
      const want = new Map(manifest.files.map((f) => [f.path, f]));
      const problems = [
        ...staged.files.filter((f) => !want.has(f.path)).map((f) => `${f.path} was not in the manifest`),
        ...manifest.files.filter((f) => !staged.files.some((s) => s.path === f.path)).map((f) => `${f.path} was not uploaded`),
        ...staged.files.filter((f) => want.has(f.path) && (want.get(f.path)!.sha256 !== f.sha256 || want.get(f.path)!.size !== f.size)).map((f) => `${f.path} differs from the manifest`),
      ];
      if (problems.length) {
        fs.rmSync(staging, { recursive: true, force: true });
        refuse(request, 422, `checkpoint ${q.path} not committed: ${problems.join('; ')}`, 'digest_mismatch');
      }
      // Synced and renamed in one step: the step folder is either complete or absent, as a local write leaves it.
      for (const f of staged.files) {
        const fd = fs.openSync(path.join(staging, ...f.path.split('/')), 'r');
        fs.fsyncSync(fd);
        fs.closeSync(fd);
      }
      fs.renameSync(staging, abs);
      return { path: q.path, committed: true, files: staged.files.length };
    });
  });
}

