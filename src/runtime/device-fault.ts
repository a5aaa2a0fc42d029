// A GPU that disappears or runs out of memory in the middle of a step: recognised from ONNX Runtime's error text
// (CUDA provider, WebGPU provider through Dawn), turned into an error that names the device and says what the
// worker does about it. Out of memory: the requests on it fail, the worker re-creates its session and serves on.
// Lost: a CUDA context or a Dawn device does not come back within a process, so the worker answers and exits
// for its supervisor (hearth serve restarts embedded workers; a Redis worker's service manager restarts it,
// and BullMQ hands the jobs it held to another worker). Nothing else in the queue is touched either way.

export type DeviceFaultKind = 'out-of-memory' | 'lost';

/** HTTP status of a request that failed because of its device: the service may work again (another worker, later). */
export const DEVICE_FAULT_STATUS = 503;

export class DeviceFaultError extends Error {
  readonly status = DEVICE_FAULT_STATUS;
  constructor(
    readonly device: string,
    readonly kind: DeviceFaultKind,
    /** ONNX Runtime's own message. */
    readonly detail: string,
  ) {
    super(kind === 'lost'
      ? `device ${device} was lost during this request (${detail}); the worker restarts, retry the request`
      : `device ${device} ran out of memory during this request (${detail}); the worker re-creates its session, retry the request or lower HEARTH_MAX_NUM_SEQS / HEARTH_KV_CACHE_MB`);
  }
}

const OUT_OF_MEMORY = [
  /out of memory/i, /CUDA_ERROR_OUT_OF_MEMORY/, /cudaErrorMemoryAllocation/, /CUBLAS_STATUS_ALLOC_FAILED/, /CUDNN_STATUS_ALLOC_FAILED/,
  /Failed to allocate memory/i, /OutOfMemory/, /\bOOM\b/,
];
const LOST = [
  /device (?:is |was )?lost/i, /DeviceLost/, /device has been removed/i, /cudaErrorDevicesUnavailable/, /cudaErrorLaunchFailure/,
  /illegal memory access/i, /CUDA_ERROR_ILLEGAL_ADDRESS/, /cudaErrorIllegalAddress/, /unspecified launch failure/i, /GPU has fallen off the bus/i,
  /ECC error/i, /CUDA driver version is insufficient/i,
];

/** The fault an error from a session on `device` says happened, or null (an ordinary error). The CPU can run out of memory too. */
export function deviceFaultOf(err: unknown, device: string): DeviceFaultError | null {
  if (err instanceof DeviceFaultError) return err;
  const text = (err as Error)?.message ?? String(err);
  const detail = text.split('\n')[0].slice(0, 300);
  if (LOST.some((re) => re.test(text))) return new DeviceFaultError(device, 'lost', detail);
  if (OUT_OF_MEMORY.some((re) => re.test(text))) return new DeviceFaultError(device, 'out-of-memory', detail);
  return null;
}
