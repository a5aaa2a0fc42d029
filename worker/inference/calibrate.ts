// The hardware endpoint prices a model from throughput measured on the device that would serve it.
// A calibration run: one warm-up, then a 128-token prompt (prefill speed from the time to the first token)
// and 32 greedy tokens with EOS ignored (decode speed from the time between first and last token).
import type { HearthEngine, InferenceEvent } from './openai-adapter.js';

export interface CalibrationResult {
  prefillTps: number;
  decodeTps: number;
  promptTokens: number;
  decodeTokens: number;
}

/** A fixed prompt of ordinary token ids (ids below 3 are usually special). */
export function calibrationPrompt(vocabSize: number, length: number): number[] {
  return Array.from({ length }, (_, i) => 3 + ((i * 7919) % Math.max(1, vocabSize - 3)));
}

function timedRun(hearth: HearthEngine, prompt: number[], decodeTokens: number): Promise<{ ttftMs: number; totalMs: number; completionTokens: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let tFirst: number | null = null;
    let completionTokens = 0;
    const body = { model: 'calibration', prompt, max_tokens: decodeTokens, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } };
    void hearth.submit({ kind: 'completion', body, model: 'calibration', adapter: null }, (e: InferenceEvent) => {
      if (e.type === 'chunk') {
        tFirst ??= performance.now();
        const usage = (e.data as { usage?: { completion_tokens?: number } | null }).usage;
        if (usage?.completion_tokens) completionTokens = usage.completion_tokens;
      } else if (e.type === 'result') {
        resolve({ ttftMs: (tFirst ?? performance.now()) - t0, totalMs: performance.now() - t0, completionTokens });
      } else if (e.type === 'error') reject(new Error(`calibration run failed: ${e.message}`));
    });
  });
}

export async function calibrate(hearth: HearthEngine, vocabSize: number, promptTokens = 128, decodeTokens = 32): Promise<CalibrationResult> {
  const prompt = calibrationPrompt(vocabSize, promptTokens);
  await timedRun(hearth, prompt.slice(0, 16), 4); // warm-up: first-run costs are not throughput
  const run = await timedRun(hearth, prompt, decodeTokens);
  const decoded = Math.max(1, run.completionTokens - 1);
  return {
    prefillTps: promptTokens / (run.ttftMs / 1000),
    decodeTps: decoded / (Math.max(1e-3, run.totalMs - run.ttftMs) / 1000),
    promptTokens,
    decodeTokens: run.completionTokens,
  };
}
