// The entry of a worker's pulse thread (pulse.ts): the sources are TypeScript, loaded through tsx as bin/hearth.js
// loads the CLI. A thread has its own module loader; the main thread's registration does not reach it.
import { register } from 'tsx/esm/api';

register();
await import('./pulse-thread.ts');
