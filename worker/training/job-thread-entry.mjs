// The entry of a training thread (training-thread.ts): the sources are TypeScript, loaded through tsx as bin/hearth.js
// loads the CLI. A thread has its own module loader; the main thread's registration does not reach it.
import { register } from 'tsx/esm/api';

register();
await import('./job-thread.ts');
