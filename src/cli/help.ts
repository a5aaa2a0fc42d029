// `hearth <command> --help`: what each command does and takes, printed without loading the command (so
// `hearth serve --help` never opens a store or starts a server).

export const COMMAND_HELP: Record<string, string> = {
  serve: `usage: hearth serve

Runs the HTTP service: the W&B Training API, the OpenAI-compatible inference API and Weave-compatible tables,
on HOST:PORT (default 127.0.0.1:8080), with its state under HEARTH_HOME (default ./.hearth).
An empty HEARTH_HOME gets the demo model hearth/tiny-random-llama (random weights).

Without REDIS_URL the queue is embedded: the workers named by HEARTH_WORKERS (default
inference:cpu,training:cpu) run as child processes. With REDIS_URL, start workers with "hearth worker".
Every setting is an environment variable: see docs/configuration.md.`,
  keys: `usage:
  hearth keys create [--entity <name>]   print a new API key (shown once, stored hashed)
  hearth keys list                       list keys (prefix, entity, created, revoked)
  hearth keys revoke <prefix>            revoke a key at once

Keys live in HEARTH_HOME's store; the entity defaults to HEARTH_ENTITY (local).`,
  worker: `usage: hearth worker --kind inference|training [--device cpu|cuda[:N]|webgpu[:N]|auto] [--redis <url>] [--ipc]

Runs one worker for a Redis-backed installation (REDIS_URL or --redis): it takes inference requests or
training jobs from the queues of HEARTH_QUEUE_PREFIX and reports back to the API. --ipc is how "hearth serve"
starts its embedded workers. Settings: docs/configuration.md (Queue and workers, Inference engine).`,
  models: `usage:
  hearth models import <hf-folder | file.gguf> [--id publisher/name]
  hearth models list [--json]
  hearth models rm <publisher/name>
  hearth models export-onnx <publisher/name> <out-dir> [--attention gqa|onnx23|standard] [--max-context N]

Base models live under HEARTH_HOME/models; a running server sees imports and removals at once.`,
  generate: `usage: hearth generate --model <publisher/name | folder> --prompt <text> [--max-tokens N] [--temperature T]
                       [--seed S] [--device cpu|cuda[:N]|webgpu[:N]] [--weights f32|q4] [--json]

Raw text generation with a local model (no chat template), without a server.`,
  bench: `usage: hearth bench hardware --model <publisher/name> [--device cpu|cuda[:N]|webgpu[:N]]

Measures the model on this device (128-token prefill, 32 decoded tokens) and prints the token prices the
hardware endpoint would answer.`,
  tour: `usage: hearth tour [--url http://127.0.0.1:8080] [--key <key>] [--model hearth/tiny-random-llama]

Talks to a running server ("npm start") over HTTP, printing each request: uploads models/tour-corpus.txt as SFT
rows (some paragraphs held out), creates a trained model on the demo model, runs an SFT job (LoRA) while printing
its loss, then asks the base model and the new checkpoint the same questions (greedy), shows both answers side by
side, and scores both on the held-out paragraphs.
Without --key (or HEARTH_KEY) it creates a key in HEARTH_HOME's store first, as "hearth keys create" does.`,
};

/** True when argv asks for help (`--help` or `-h` anywhere). */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}
