// Runs one inference task through a worker's handlers as the worker host does, and gives its answer as a promise:
// the chunks it emitted, then the result's data, or the error event as an InferenceFailure (a handler that throws,
// e.g. a TaskError for a model that cannot load, rejects with what it threw).
import type { Handlers } from '../../worker/handlers.js';
import type { InferenceTask } from '../../src/protocol/messages.js';
import { InferenceFailure, type InferenceEvent } from '../../src/protocol/inference-events.js';

export async function runInferenceTask(
  handlers: Handlers, task: InferenceTask, opts: { signal?: AbortSignal; onChunk?: (data: unknown) => void } = {},
): Promise<unknown> {
  let end: InferenceEvent | null = null;
  await handlers.inference!(task, {
    signal: opts.signal ?? new AbortController().signal,
    emit: (event) => {
      if (end) throw new Error(`event ${event.type} after the request's ${end.type}`);
      if (event.type === 'chunk') opts.onChunk?.(event.data);
      else end = event;
    },
  });
  const last = end as InferenceEvent | null;
  if (!last) throw new Error('the handler resolved without a result or an error');
  if (last.type === 'error') throw new InferenceFailure(last);
  return last.type === 'result' ? last.data : undefined;
}
