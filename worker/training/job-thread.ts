// Inside the training worker's job thread (training-thread.ts starts it): set the device once, then run each job the
// main thread hands over and send back its log lines, events and result. Cancellation and progress go through
// shared memory: the job's compute does not yield to this thread's event loop while a step runs.
import { parentPort, workerData } from 'node:worker_threads';
import { faultPointBlocking } from '../../src/runtime/fault-points.js';
import { runTrainingJob } from './job.js';
import { TrainingCancelledError } from './loop.js';
import { CANCEL, PROGRESS, type JobMessage, type ThreadInput, type ThreadMessage } from './training-thread.js';
import { useTrainingDevice } from './training-device.js';

const post = (m: ThreadMessage) => parentPort!.postMessage(m);
const log = (line: string) => post({ type: 'log', line });

useTrainingDevice((workerData as ThreadInput).device, log);

async function run({ spec, control: buffer }: JobMessage): Promise<void> {
  const control = new Int32Array(buffer);
  post({ type: 'begun' });
  try {
    // The fault tests hold a job here, before its model loads, with this thread blocked as a long load blocks it.
    faultPointBlocking('training-model-load');
    const result = await runTrainingJob(spec, (event) => post({ type: 'event', event }), {
      isCancelled: () => {
        Atomics.add(control, PROGRESS, 1);
        return Atomics.load(control, CANCEL) === 1;
      },
      log,
    });
    post({ type: 'result', result });
  } catch (err) {
    const e = err as Error;
    post({ type: 'failed', message: e.message, stack: e.stack, cancelled: err instanceof TrainingCancelledError });
  }
}

parentPort!.on('message', (m: JobMessage) => void run(m));
