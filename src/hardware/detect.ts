// Device detection, run by every worker at start (and sent along with its heartbeats):
// NVIDIA GPUs through nvidia-smi, AMD GPUs through rocm-smi, and the CPU through /proc/cpuinfo.
// A missing or failing tool means "no GPUs of that vendor" plus a probe entry saying why.
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import type { CpuDevice, DetectionProbe, DeviceReport, GpuDevice } from '../protocol/hardware.js';
import { parseCpuInfo } from './cpuinfo.js';
import { NVIDIA_QUERY_FIELDS, NVIDIA_QUERY_FIELDS_LEGACY, parseNvidiaSmiCsv } from './nvidia-smi.js';
import { ROCM_SMI_ARGS, parseRocmSmiJson } from './rocm-smi.js';
import { runCommand } from './run-command.js';

export interface DetectOptions {
  /** Environment for the vendor tools (PATH decides where they are found). Default: process.env. */
  env?: NodeJS.ProcessEnv;
  /** Per-command timeout. Default 5000 ms: nvidia-smi can take seconds on a cold driver. */
  timeoutMs?: number;
  /** Default /proc/cpuinfo. */
  cpuinfoPath?: string;
  /** Receives one line per probe that found nothing, e.g. "nvidia-smi: nvidia-smi not found on PATH". */
  debug?: (message: string) => void;
}

interface Probed {
  gpus: GpuDevice[];
  probe: DetectionProbe;
}

async function detectNvidia(env: NodeJS.ProcessEnv | undefined, timeoutMs: number): Promise<Probed> {
  const query = (fields: readonly string[]) =>
    runCommand('nvidia-smi', [`--query-gpu=${fields.join(',')}`, '--format=csv,noheader,nounits'], { env, timeoutMs });
  let fields: readonly string[] = NVIDIA_QUERY_FIELDS;
  let result = await query(fields);
  // Older drivers reject the compute_cap field; ask again without it rather than report no GPU.
  if (result.status === 'failed' && /compute_cap|not a valid field/i.test(result.detail)) {
    fields = NVIDIA_QUERY_FIELDS_LEGACY;
    result = await query(fields);
  }
  if (result.status !== 'ok') return { gpus: [], probe: { source: 'nvidia-smi', ...result } };
  try {
    return { gpus: parseNvidiaSmiCsv(result.stdout, fields), probe: { source: 'nvidia-smi', status: 'ok' } };
  } catch (error) {
    return { gpus: [], probe: { source: 'nvidia-smi', status: 'failed', detail: (error as Error).message } };
  }
}

async function detectAmd(env: NodeJS.ProcessEnv | undefined, timeoutMs: number): Promise<Probed> {
  const result = await runCommand('rocm-smi', ROCM_SMI_ARGS, { env, timeoutMs });
  if (result.status !== 'ok') return { gpus: [], probe: { source: 'rocm-smi', ...result } };
  try {
    return { gpus: parseRocmSmiJson(result.stdout), probe: { source: 'rocm-smi', status: 'ok' } };
  } catch (error) {
    return { gpus: [], probe: { source: 'rocm-smi', status: 'failed', detail: (error as Error).message } };
  }
}

/** Usable memory: the cgroup limit when the process runs in a constrained container. */
function usableMemoryBytes(): number {
  const total = os.totalmem();
  const constrained = process.constrainedMemory?.() ?? 0;
  return constrained > 0 && constrained < total ? constrained : total;
}

async function detectCpu(cpuinfoPath: string): Promise<{ cpu: CpuDevice; probe: DetectionProbe }> {
  // availableParallelism honours CPU affinity (docker --cpuset-cpus); /proc/cpuinfo lists every host CPU.
  const usable = os.availableParallelism();
  const memoryMiB = Math.floor(usableMemoryBytes() / 2 ** 20);
  try {
    const info = parseCpuInfo(await readFile(cpuinfoPath, 'utf8'));
    const cpu: CpuDevice = { model: info.model, arch: process.arch, cores: Math.min(info.cores, usable), memoryMiB, simd: info.simd };
    if (info.physicalCores !== undefined) cpu.physicalCores = info.physicalCores;
    return { cpu, probe: { source: 'cpuinfo', status: 'ok' } };
  } catch (error) {
    // Not Linux (or no /proc): Node still knows the model and count, not the SIMD flags.
    const model = os.cpus()[0]?.model?.trim() || 'unknown CPU';
    const cpu: CpuDevice = { model, arch: process.arch, cores: usable, memoryMiB, simd: [] };
    return { cpu, probe: { source: 'cpuinfo', status: 'failed', detail: `${cpuinfoPath}: ${(error as Error).message}` } };
  }
}

export async function detectDevices(opts: DetectOptions = {}): Promise<DeviceReport> {
  const timeoutMs = opts.timeoutMs ?? 5000;
  const env = opts.env ?? process.env;
  const [nvidia, amd, cpu] = await Promise.all([
    detectNvidia(env, timeoutMs),
    detectAmd(env, timeoutMs),
    detectCpu(opts.cpuinfoPath ?? '/proc/cpuinfo'),
  ]);
  const probes = [nvidia.probe, amd.probe, cpu.probe];
  for (const p of probes) if (p.status !== 'ok') opts.debug?.(`${p.source}: ${p.detail ?? p.status}`);
  return {
    host: os.hostname(),
    detectedAt: new Date().toISOString(),
    cpu: cpu.cpu,
    gpus: [...nvidia.gpus, ...amd.gpus],
    probes,
  };
}
