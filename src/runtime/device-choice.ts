// Which device a worker computes on, decided once when it starts (before its first heartbeat, so the
// device it reports, and the hardware options and prices built from that, are the one actually used).
//
//   cpu         always works
//   cuda:N      only if ONNX Runtime's CUDA provider loads (its libraries are not in the npm package)
//   webgpu:N    only if Dawn finds a WebGPU adapter (the GPU driver's Vulkan ICD); N must be 0 (below)
//   auto        cuda:0 if its provider loads, else webgpu:0 if an adapter exists and detection saw a GPU, else cpu
//
// An explicit device that does not work is an error (a GPU worker silently computing on the CPU would be
// priced as a GPU); `auto` falls back and says why in its one log line. The probes create a tiny session
// with the provider; chooseDevice itself is pure over them (unit-tested with fakes).
import type { GpuDevice } from '../protocol/hardware.js';
import { DEVICE_CHOICES, formatDevice, parseDevice, type DeviceName } from '../domain/device-name.js';

/** null: the provider works; a string: why not. */
export type ProbeResult = string | null;

export interface DeviceProbes {
  cuda(index: number): Promise<ProbeResult>;
  webgpu(): Promise<ProbeResult>;
}

export interface DeviceChoice {
  /** The concrete device: "cpu", "cuda:0", "webgpu:0". */
  device: string;
  /** The one log line: what was asked, what was chosen and why. */
  line: string;
}

/**
 * ORT 1.30's Node binding takes no adapter choice for WebGPU (its provider options have no device id; Dawn
 * picks the first adapter), so only webgpu:0 is honest. Several GPUs: one worker per GPU, each in a
 * container (or with a Vulkan ICD filter) that shows it only that GPU.
 */
function webgpuIndexError(d: DeviceName): string | null {
  return d.index === 0 ? null : `webgpu:${d.index}: ONNX Runtime's Node binding cannot select a WebGPU adapter other than the first; run one worker per GPU, each seeing only its GPU (e.g. a container per GPU), as webgpu:0`;
}

/** A GPU's description for the log line (the WebGPU adapter is the driver's; detection names the card). */
function gpuLabel(gpus: readonly GpuDevice[], index: number): string {
  const g = gpus[index];
  return g ? `${g.name}, ${g.memoryMiB} MiB` : 'no GPU detected by nvidia-smi/rocm-smi';
}

export async function chooseDevice(requested: string, probes: DeviceProbes, gpus: readonly GpuDevice[] = []): Promise<DeviceChoice> {
  if (requested.trim() === 'auto') return chooseAuto(probes, gpus);
  const d = parseDevice(requested);
  const device = formatDevice(d);
  if (d.kind === 'cpu') return { device, line: `device cpu (asked for)` };
  if (d.kind === 'cuda') {
    const why = await probes.cuda(d.index);
    if (why) throw new Error(`device ${device}: the CUDA execution provider does not load (${why}); see docs/gpu.md, or use --device auto or webgpu`);
    return { device, line: `device ${device} (asked for; CUDA provider loaded; ${gpuLabel(gpus.filter((g) => g.vendor === 'nvidia'), d.index)})` };
  }
  const indexError = webgpuIndexError(d);
  if (indexError) throw new Error(`device ${indexError}`);
  const why = await probes.webgpu();
  if (why) throw new Error(`device ${device}: no WebGPU adapter (${why}); the GPU's Vulkan driver must be installed (see docs/gpu.md)`);
  return { device, line: `device ${device} (asked for; WebGPU adapter on ${gpuLabel(gpus, 0)})` };
}

async function chooseAuto(probes: DeviceProbes, gpus: readonly GpuDevice[]): Promise<DeviceChoice> {
  const cudaWhy = await probes.cuda(0);
  if (!cudaWhy) return { device: 'cuda:0', line: `device auto → cuda:0 (CUDA provider loaded; ${gpuLabel(gpus.filter((g) => g.vendor === 'nvidia'), 0)})` };
  const reasons = [`CUDA provider not loadable: ${cudaWhy}`];
  const webgpuWhy = await probes.webgpu();
  if (webgpuWhy) reasons.push(`no WebGPU adapter: ${webgpuWhy}`);
  // An adapter without a detected GPU is a software rasterizer (SwiftShader, lavapipe) or a GPU the vendor
  // tools cannot see: slower than the CPU in the first case, so auto does not take it; webgpu:0 still can.
  else if (gpus.length === 0) reasons.push('a WebGPU adapter exists but no GPU was detected (a software adapter is slower than the CPU; ask for webgpu:0 to use it anyway)');
  else return { device: 'webgpu:0', line: `device auto → webgpu:0 (${reasons[0]}; WebGPU adapter on ${gpuLabel(gpus, 0)})` };
  return { device: 'cpu', line: `device auto → cpu (${reasons.join('; ')})` };
}

/** An ORT error's message without its source location and assertion text, short enough for a log line. */
export function providerError(err: unknown): string {
  const first = ((err as Error)?.message ?? String(err)).split('\n')[0].trim();
  const m = / was false\. (.*)$/.exec(first);
  return (m ? m[1] : first).slice(0, 300) || 'unknown error';
}

/** A one-node graph (y = x + x) to create probe sessions from. */
async function probeGraph(): Promise<Uint8Array> {
  const { GraphBuilder, DataType } = await import('./onnx-proto.js');
  const g = new GraphBuilder();
  g.input('x', DataType.FLOAT, [1]);
  g.node('Add', ['x', 'x'], { outputs: ['y'] });
  g.output('y', DataType.FLOAT, [1]);
  return g.toModelBytes('device_probe');
}

/** Probes with ONNX Runtime itself: a provider works when a session on it can be created and run. */
export function ortDeviceProbes(): DeviceProbes {
  const probe = async (provider: unknown): Promise<ProbeResult> => {
    const ort = await import('onnxruntime-node');
    try {
      const session = await ort.InferenceSession.create(await probeGraph(), {
        executionProviders: [provider as string], logSeverityLevel: 3,
      });
      const out = await session.run({ x: new ort.Tensor('float32', Float32Array.of(1), [1]) });
      const y = (out.y.data as Float32Array)[0];
      await session.release();
      return y === 2 ? null : `a probe run returned ${y} for 1 + 1`;
    } catch (err) {
      return providerError(err);
    }
  };
  return {
    cuda: (index) => probe({ name: 'cuda', deviceId: index }),
    webgpu: () => probe('webgpu'),
  };
}

export { DEVICE_CHOICES };
