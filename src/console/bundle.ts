// Builds the console (src/console/web, Preact + uPlot) into one JS and one CSS file with esbuild, in memory.
// `hearth serve` builds it on the first request for a console page and keeps it for the life of the process
// (about a second on a laptop); `npm run build` runs the same build to catch errors before a release.
// Nothing is fetched at run time: every import resolves to node_modules or these sources.
import crypto from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

export interface ConsoleAsset {
  body: Buffer;
  contentType: string;
  etag: string;
}

export interface ConsoleBundle {
  /** Keyed by file name as served under /console/ (app.js, app.css). */
  assets: Map<string, ConsoleAsset>;
}

export const CONSOLE_SOURCE_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'web');

const contentTypes: Record<string, string> = { '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

export async function buildConsoleBundle(opts: { minify?: boolean } = {}): Promise<ConsoleBundle> {
  const result = await esbuild.build({
    entryPoints: { app: path.join(CONSOLE_SOURCE_DIR, 'main.tsx') },
    bundle: true,
    write: false,
    outdir: '/console',
    format: 'esm',
    target: ['es2022'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: opts.minify ?? true,
    legalComments: 'none',
    logLevel: 'silent',
    absWorkingDir: CONSOLE_SOURCE_DIR,
  });
  const assets = new Map<string, ConsoleAsset>();
  for (const file of result.outputFiles) {
    const name = path.basename(file.path);
    const body = Buffer.from(file.contents);
    const etag = `"${crypto.createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    assets.set(name, { body, contentType: contentTypes[path.extname(name)] ?? 'application/octet-stream', etag });
  }
  return { assets };
}

let cached: Promise<ConsoleBundle> | null = null;

/** The bundle of this process, built once; a failed build is retried on the next call. */
export function consoleBundle(): Promise<ConsoleBundle> {
  cached ??= buildConsoleBundle().catch((err: unknown) => {
    cached = null;
    throw err;
  });
  return cached;
}

// `tsx src/console/bundle.ts`: build once and print the sizes (npm run build runs this).
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const bundle = await buildConsoleBundle();
  for (const [name, asset] of bundle.assets) process.stdout.write(`console/${name}  ${(asset.body.length / 1024).toFixed(1)} KiB\n`);
}
