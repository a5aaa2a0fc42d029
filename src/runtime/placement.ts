// Which execution provider ran each node: read from ONNX Runtime's profile (every node event names its
// provider), so a GPU session can say in one log line which operators had no device kernel and ran on the
// CPU instead (ORT falls back per node; the rest of the graph stays on the device).

/** One event of ORT's profile JSON (the fields read here). */
export interface ProfileEvent {
  cat?: string;
  name?: string;
  args?: { provider?: string; op_name?: string };
}

export interface Placement {
  /** Nodes per provider, e.g. { WebGpuExecutionProvider: 60, CPUExecutionProvider: 9 }. */
  nodesByProvider: Record<string, number>;
  /** Operator types that ran on the CPU provider, with their node counts. */
  cpuOps: Record<string, number>;
}

/** Counts each node once (a profile of several runs lists a node once per run). */
export function placementOf(events: readonly ProfileEvent[]): Placement {
  const seen = new Set<string>();
  const nodesByProvider: Record<string, number> = {};
  const cpuOps: Record<string, number> = {};
  for (const e of events) {
    const provider = e.args?.provider, op = e.args?.op_name;
    if (e.cat !== 'Node' || !provider || !op || !e.name || seen.has(e.name)) continue;
    seen.add(e.name);
    nodesByProvider[provider] = (nodesByProvider[provider] ?? 0) + 1;
    if (provider === 'CPUExecutionProvider') cpuOps[op] = (cpuOps[op] ?? 0) + 1;
  }
  return { nodesByProvider, cpuOps };
}

/**
 * "webgpu:0 runs 60 nodes on WebGpuExecutionProvider; 9 on the CPU, no device kernel: Cast×2, Expand, …".
 * ORT itself keeps small int64 shape arithmetic (Shape, Squeeze, Sub, …) on the CPU on purpose.
 */
export function placementLine(device: string, p: Placement): string {
  const cpu = p.nodesByProvider.CPUExecutionProvider ?? 0;
  const device_ = Object.entries(p.nodesByProvider).filter(([k]) => k !== 'CPUExecutionProvider').map(([k, n]) => `${n} nodes on ${k}`);
  const ops = Object.entries(p.cpuOps).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([op, n]) => (n > 1 ? `${op}×${n}` : op));
  return `${device} runs ${device_.join(', ') || 'no nodes on the device'}; ${cpu === 0 ? 'none on the CPU' : `${cpu} on the CPU (no device kernel or shape arithmetic ORT keeps there): ${ops.join(', ')}`}`;
}
