// The model loads a worker has under way, announced to the API before they start.
// Loading a model (graph build, ONNX Runtime session creation: seconds to minutes for a real-size model) runs on
// the worker's only thread and blocks its event loop, so no heartbeat can leave until it ends. The worker therefore
// says "loading <model>" in a heartbeat sent *before* the load begins, and the API gives a worker in that state
// HEARTH_LOAD_TIMEOUT instead of HEARTH_HEARTBEAT_TIMEOUT to speak again (src/queue/worker-directory.ts). A worker
// that dies while loading is still caught: at once when its process exits (embedded queue), after the load
// timeout otherwise.

export interface ModelLoad {
  model: string;
  /** Worker clock, when the load was announced. */
  sinceMs: number;
}

export class ModelLoads {
  private readonly underway = new Map<string, ModelLoad>();
  private announce: () => Promise<void> | void = () => {};

  /** The host's way to send a heartbeat now (worker/host.ts sets it). */
  onChange(announce: () => Promise<void> | void): void {
    this.announce = announce;
  }

  current(): ModelLoad[] {
    return [...this.underway.values()];
  }

  /**
   * Run `load` as an announced load of `model`: the heartbeat saying so has been handed to the transport before
   * `load` starts blocking, and the one saying it ended goes out as soon as it returns or throws.
   */
  async during<T>(model: string, load: () => Promise<T>): Promise<T> {
    this.underway.set(model, { model, sinceMs: Date.now() });
    // A transport that cannot send now (Redis reconnecting) does not stop the load; the next heartbeat says it.
    await Promise.resolve(this.announce()).catch(() => {});
    try {
      return await load();
    } finally {
      this.underway.delete(model);
      void Promise.resolve(this.announce()).catch(() => {});
    }
  }
}
