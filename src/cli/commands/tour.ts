// hearth tour [--url http://127.0.0.1:8080] [--key <key>] [--model hearth/tiny-random-llama]
//
// Fine-tunes the demo model on models/tour-corpus.txt through a running server, as a user would with curl:
// it makes an API key in HEARTH_HOME's key store (what `hearth keys create` does; skipped with --key), then
// talks HTTP only, printing each request. It uploads the corpus as SFT rows, creates a trained model, starts
// an SFT job, follows its loss from the job's events, and asks the base model and the new checkpoint the
// same questions (greedy) so the difference shows. src/cli/tour-data.ts holds the data and the n-gram
// measure; models/README.md the measured numbers. The held-out loss (paragraphs it never trains on) is
// scored by the server (legacy completions with `echo` and `logprobs`), laid out as the training rows are
// and as raw text.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dbPath, loadConfig } from '../../config/config.js';
import { Store } from '../../store/sqlite/store.js';
import { ApiKeys } from '../../services/api-keys.js';
import { parseArgs, stringFlag } from '../args.js';
import { CHATML_START, chatMlRow, corpusWindows, heldOutWindows, sftJsonl, sharedNgrams, splitCorpus, TOUR_TRAINING } from '../tour-data.js';

export const DEMO_MODEL = 'hearth/tiny-random-llama';
export const TOUR_PROJECT = 'tour';
/** What the tour asks both models: openings of corpus paragraphs it trained on, and one it did not see. */
export const TOUR_PROMPTS = ['There was once a', 'Mara smiled and handed', 'Tell me a story.'];
/** Words of each held-out paragraph scored as raw text (keeps every prompt well inside a small context). */
const HELD_OUT_WORDS = 60;

/**
 * The text the tour trains on: simple, repetitive stories in the words of models/tiny-corpus.txt (which the
 * demo tokenizer was trained on, so they are mostly whole tokens), kept apart from it so the tour's data can
 * grow without changing every generated model's tokenizer.
 */
export function corpusText(): string {
  return readFileSync(fileURLToPath(new URL('../../../models/tour-corpus.txt', import.meta.url)), 'utf8');
}

export interface TourOptions {
  baseUrl: string;
  key: string;
  baseModel?: string;
  /** Name of the trained model to create (default: tour-corpus-<timestamp>, a new one per run). */
  modelName?: string;
  /** Where the tour's lines go (stdout for the command). */
  print?: (line: string) => void;
  /** Longest wait for the job. */
  timeoutMs?: number;
}

export interface TourAnswer {
  prompt: string;
  base: string;
  checkpoint: string;
  /** Distinct word bigrams of each answer that also occur in the corpus. */
  baseShared: string[];
  checkpointShared: string[];
}

export interface HeldOutLoss {
  /** Mean loss, nats per token. */
  base: number;
  checkpoint: number;
  /** Tokens scored. */
  tokens: number;
}

export interface TourResult {
  /**
   * Mean loss of each model on the held-out paragraphs laid out as the training rows are (their first words as
   * the user turn, the answer's tokens scored), scored by the server (completions `echo`). Null when the model's
   * tokenizer has no ChatML tokens (the rows' layout is the demo model's template; see --model).
   */
  heldOut: HeldOutLoss | null;
  /** The same paragraphs as raw text (no chat layout): how much of what it learned carries over. */
  heldOutRawText: HeldOutLoss;
  jobId: string;
  modelId: string;
  /** The checkpoint's inference name (wandb-artifact:///<entity>/<project>/<name>:step<N>). */
  checkpointName: string;
  losses: number[];
  answers: TourAnswer[];
  trainSeconds: number;
}

class TourClient {
  constructor(
    private readonly baseUrl: string,
    private readonly key: string,
    private readonly print: (line: string) => void,
  ) {}

  async call<T = Record<string, unknown>>(method: string, path: string, body?: unknown, opts: { ndjson?: string; quiet?: boolean } = {}): Promise<T> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.key}` };
    let payload: string | undefined;
    if (opts.ndjson !== undefined) {
      headers['content-type'] = 'application/x-ndjson';
      payload = opts.ndjson;
    } else if (body !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    if (!opts.quiet) this.print(`→ ${method} ${path}${describeBody(body, opts.ndjson)}`);
    const started = performance.now();
    const res = await fetch(this.baseUrl + path, { method, headers, body: payload });
    const text = await res.text();
    if (!opts.quiet) this.print(`  ${res.status} in ${Math.round(performance.now() - started)} ms`);
    if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text.slice(0, 400)}`);
    return JSON.parse(text) as T;
  }
}

function describeBody(body: unknown, ndjson: string | undefined): string {
  if (ndjson !== undefined) return `  (JSONL, ${ndjson.trimEnd().split('\n').length} rows, ${(ndjson.length / 1024).toFixed(0)} KB)`;
  if (body === undefined) return '';
  const json = JSON.stringify(body);
  return `  ${json.length > 140 ? json.slice(0, 137) + '...' : json}`;
}

const oneLine = (s: string) => JSON.stringify(s.replace(/\s+/g, ' ').trim());

/** A text bar for a loss between `lo` and `hi`. */
function bar(value: number, lo: number, hi: number, width = 30): string {
  const f = Math.max(0, Math.min(1, (value - lo) / Math.max(1e-9, hi - lo)));
  return '█'.repeat(Math.round(f * width)).padEnd(width, '·');
}

export async function runTour(opts: TourOptions): Promise<TourResult> {
  const print = opts.print ?? ((line: string) => process.stdout.write(`${line}\n`));
  const api = new TourClient(opts.baseUrl.replace(/\/$/, ''), opts.key, print);
  const baseModel = opts.baseModel ?? DEMO_MODEL;
  const name = opts.modelName ?? `tour-corpus-${new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-')}`;
  const corpus = corpusText();
  const split = splitCorpus(corpus);
  const windows = corpusWindows(split.train);
  const jsonl = sftJsonl(windows);

  print(`\n1. The server and its models`);
  await api.call('GET', '/v1/health');
  const models = await api.call<{ data: { id: string }[] }>('GET', '/v1/models');
  if (!models.data.some((m) => m.id === baseModel)) throw new Error(`the server does not serve ${baseModel} (it serves ${models.data.map((m) => m.id).join(', ') || 'nothing'})`);

  print(`\n2. Upload the corpus as SFT rows: ${windows.length} windows of ${TOUR_TRAINING.windowWords} words (one every ${TOUR_TRAINING.strideWords}) ` +
    `from ${split.train.length} paragraphs (${split.heldOut.length} held out), ${TOUR_TRAINING.epochs} passes`);
  const dataset = await api.call<{ url: string }>('POST', `/v1/preview/datasets?project=${TOUR_PROJECT}&name=tour-corpus`, undefined, { ndjson: jsonl });

  print(`\n3. A trained model on ${baseModel}, and an SFT job (LoRA)`);
  const model = await api.call<{ id: string; entity: string }>('POST', '/v1/preview/models', { project: TOUR_PROJECT, name, base_model: baseModel });
  const job = await api.call<{ id: string }>('POST', '/v1/preview/sft-training-jobs', {
    model_id: model.id, training_data_url: dataset.url, config: { batch_size: TOUR_TRAINING.batchSize, learning_rate: TOUR_TRAINING.learningRate },
  });
  print(`  console: ${opts.baseUrl.replace(/\/$/, '')}/#/jobs/${job.id}`);

  print(`\n4. Follow the loss (GET /v1/preview/training-jobs/${job.id}/events?after=…, polled)`);
  const started = performance.now();
  const losses: number[] = [];
  let total = 0;
  let after = '';
  let lastPrinted = -1;
  const timeoutMs = opts.timeoutMs ?? 600_000;
  for (;;) {
    const page = await api.call<{ data: { id: string; type: string; data: Record<string, unknown> }[]; has_more: boolean }>(
      'GET', `/v1/preview/training-jobs/${job.id}/events?limit=100${after ? `&after=${after}` : ''}`, undefined, { quiet: true },
    );
    let ended = false;
    for (const e of page.data) {
      after = e.id;
      if (e.type === 'training_started') total = Number(e.data.num_sequences ?? 0);
      if (e.type === 'gradient_step' && typeof e.data.loss === 'number') losses.push(e.data.loss);
      if (e.type === 'training_failed') throw new Error(`the job failed: ${String(e.data.error_message ?? 'no message')}`);
      if (e.type === 'training_ended') ended = true;
    }
    // One line per tenth of the job (and the last step): loss averaged over the steps since the previous line.
    const every = Math.max(1, Math.round(total / 10));
    while (losses.length > 0 && (losses.length - 1 - lastPrinted >= every || (ended && lastPrinted < losses.length - 1))) {
      const upto = Math.min(losses.length - 1, lastPrinted + every);
      const span = losses.slice(lastPrinted + 1, upto + 1);
      const mean = span.reduce((a, b) => a + b, 0) / span.length;
      print(`  step ${String(upto + 1).padStart(4)}/${total}  loss ${mean.toFixed(3)}  ${bar(mean, 0, losses[0])}  ${((performance.now() - started) / 1000).toFixed(0)} s`);
      lastPrinted = upto;
    }
    if (ended) break;
    if (performance.now() - started > timeoutMs) throw new Error(`the job did not end within ${timeoutMs / 1000} s`);
    if (!page.has_more) await new Promise((r) => setTimeout(r, 500));
  }
  const trainSeconds = (performance.now() - started) / 1000;

  const latest = await api.call<{ data: { step: number }[] }>('GET', `/v1/preview/models/${model.id}/checkpoints?limit=1&order=desc`);
  const step = latest.data[0]?.step;
  if (step === undefined) throw new Error('the job ended but the model has no checkpoint');
  const checkpointName = `wandb-artifact:///${model.entity}/${TOUR_PROJECT}/${name}:step${step}`;

  print(`\n5. Ask both, greedy (temperature 0, 32 tokens): the base model and ${checkpointName}`);
  const greedy = async (modelName: string, prompt: string) => {
    const r = await api.call<{ choices: { message: { content: string | null } }[] }>('POST', '/v1/chat/completions', {
      model: modelName, messages: [{ role: 'user', content: prompt }], max_tokens: 32, temperature: 0,
    });
    return r.choices[0]?.message.content ?? '';
  };
  const answers: TourAnswer[] = [];
  for (const prompt of TOUR_PROMPTS) {
    const base = await greedy(baseModel, prompt);
    const checkpoint = await greedy(checkpointName, prompt);
    answers.push({ prompt, base, checkpoint, baseShared: sharedNgrams(base, corpus, 2), checkpointShared: sharedNgrams(checkpoint, corpus, 2) });
  }

  print(`\n6. Held-out loss: the ${split.heldOut.length} paragraphs it never trained on, scored by each model (completions with echo and logprobs)`);
  const score = async (modelName: string, prompts: string[]) => {
    const r = await api.call<{ choices: { index: number; logprobs: { token_logprobs: (number | null)[] }; prompt_token_ids: number[] }[] }>('POST', '/v1/completions', {
      model: modelName, prompt: prompts, max_tokens: 1, temperature: 0, echo: true, logprobs: 0, return_token_ids: true,
    });
    return [...r.choices].sort((a, b) => a.index - b.index);
  };
  const mean = (values: number[]) => ({ loss: -values.reduce((a, b) => a + b, 0) / values.length, tokens: values.length });
  // As trained: each paragraph's first window as a ChatML row; the prefix (user turn and assistant header) is
  // scored alone too, so its token count says where the answer's tokens start.
  const rows = heldOutWindows(split.heldOut).map(chatMlRow);
  const scoreAsTrained = async (modelName: string) => {
    const choices = await score(modelName, [...rows.map((r) => r.prefix), ...rows.map((r) => r.full), CHATML_START]);
    // A tokenizer without ChatML's tokens reads the markers as plain text (several tokens for CHATML_START, not one
    // after an optional BOS): not the layout the model trained on.
    if (choices[2 * rows.length].prompt_token_ids.length > 2) return null;
    const values = rows.flatMap((_, i) => {
      const prefixIds = choices[i].prompt_token_ids;
      const full = choices[rows.length + i];
      if (prefixIds.some((id, k) => full.prompt_token_ids[k] !== id)) throw new Error(`held-out row ${i}: the answer changed how its prefix tokenizes`);
      return full.logprobs.token_logprobs.slice(prefixIds.length, full.prompt_token_ids.length) as number[];
    });
    return mean(values);
  };
  // Raw text: the prompt's tokens (the first unscored), then the one generated token, which is left out.
  const rawText = split.heldOut.map((p) => p.split(' ').slice(0, HELD_OUT_WORDS).join(' '));
  const scoreRawText = async (modelName: string) =>
    mean((await score(modelName, rawText)).flatMap((c) => c.logprobs.token_logprobs.slice(1, c.prompt_token_ids.length) as number[]));
  const both = async (scorer: (m: string) => Promise<{ loss: number; tokens: number } | null>): Promise<HeldOutLoss | null> => {
    const b = await scorer(baseModel);
    if (!b) return null;
    const c = (await scorer(checkpointName))!;
    return { base: b.loss, checkpoint: c.loss, tokens: b.tokens };
  };
  const heldOut = await both(scoreAsTrained);
  const heldOutRawText = (await both(scoreRawText))!;
  if (heldOut) print(`  as trained (first ${TOUR_TRAINING.promptWords} words asked, the answer scored)  base ${heldOut.base.toFixed(3)}  checkpoint ${heldOut.checkpoint.toFixed(3)} nats per token over ${heldOut.tokens} tokens`);
  else print(`  as trained: not scored (${baseModel}'s tokenizer has no ChatML tokens; the rows are laid out in the demo model's ChatML)`);
  print(`  raw text (first ${HELD_OUT_WORDS} words)                             base ${heldOutRawText.base.toFixed(3)}  checkpoint ${heldOutRawText.checkpoint.toFixed(3)} nats per token over ${heldOutRawText.tokens} tokens`);

  print(`\n7. What changed (word pairs each answer shares with the corpus)`);
  for (const a of answers) {
    print(`  ${oneLine(a.prompt)}`);
    print(`    base        ${oneLine(a.base)}`);
    print(`                ${a.baseShared.length} corpus word pairs${a.baseShared.length ? `: ${a.baseShared.slice(0, 6).join(', ')}` : ''}`);
    print(`    checkpoint  ${oneLine(a.checkpoint)}`);
    print(`                ${a.checkpointShared.length} corpus word pairs${a.checkpointShared.length ? `: ${a.checkpointShared.slice(0, 6).join(', ')}` : ''}`);
  }
  const tail = losses.slice(-5);
  print(`\n  loss ${losses[0]?.toFixed(3)} at the first step, ${(tail.reduce((a, b) => a + b, 0) / tail.length).toFixed(3)} over the last ${tail.length}; ${losses.length} steps in ${trainSeconds.toFixed(0)} s`);
  print(`  try it: curl -s -H "Authorization: Bearer $KEY" ${opts.baseUrl.replace(/\/$/, '')}/v1/chat/completions \\\n    -d '{"model":"${checkpointName}","messages":[{"role":"user","content":"There was once a"}],"max_tokens":32,"temperature":0}'`);
  return { heldOut, heldOutRawText, jobId: job.id, modelId: model.id, checkpointName, losses, answers, trainSeconds };
}

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv);
  const config = loadConfig();
  const baseUrl = stringFlag(args, 'url') ?? `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${config.port}`;
  let key = stringFlag(args, 'key') ?? process.env.HEARTH_KEY;
  if (!key) {
    // The same key store `hearth keys create` writes to: the server reads it on every request.
    const store = Store.open(dbPath(config.home));
    try {
      const created = new ApiKeys(store).create(config.apiKeyEntity);
      key = created.key;
      process.stdout.write(`Created an API key for entity "${config.apiKeyEntity}" in ${config.home}, as "hearth keys create" does (shown once):\nKEY=${key}\n`);
    } finally {
      store.close();
    }
  }
  try {
    await runTour({ baseUrl, key, baseModel: stringFlag(args, 'model') });
    return 0;
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    if (cause?.code === 'ECONNREFUSED') process.stderr.write(`hearth tour: no server at ${baseUrl}: start one first ("npm start" or "npx hearth serve")\n`);
    else process.stderr.write(`hearth tour: ${(err as Error).message}\n`);
    return 1;
  }
}
