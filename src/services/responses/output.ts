// The engine's chat answer → a Responses API `response` object (pure). Shared by the whole answer and the
// stream (src/services/responses/stream.ts), which end in the same object.
import { randomBytes } from 'node:crypto';
import type { ChatCompletionResponse, Usage } from '../../protocol/openai.js';
import type { OutputItem, OutputTextLogprob, OutputTextPart, ResponseObject, ResponsesUsage } from '../../schemas/responses.js';

type ChatLogprobEntry = NonNullable<ChatCompletionResponse['choices'][number]['logprobs']['content']>[number];
type ChatFinishReason = ChatCompletionResponse['choices'][number]['finish_reason'];

/** `resp_…`, `msg_…`, `fc_…`: OpenAI's prefixes, with 24 random bytes as hex. */
export function newResponsesId(prefix: 'resp' | 'msg' | 'fc'): string {
  return `${prefix}_${randomBytes(24).toString('hex')}`;
}

/**
 * A token's text for Responses clients. The chat route labels tokens `token_id:<id>` (what ART's trainer
 * parses); Responses clients show tokens, so a token with bytes is its text and a special token (no bytes)
 * keeps the label. A token that ends inside a multi-byte character shows U+FFFD; `bytes` stays exact.
 */
function tokenText(label: string, bytes: number[] | null): string {
  return bytes && bytes.length ? Buffer.from(bytes).toString('utf8') : label;
}

export function outputLogprobs(entries: readonly ChatLogprobEntry[] | null | undefined): OutputTextLogprob[] {
  return (entries ?? []).map((e) => ({
    token: tokenText(e.token, e.bytes),
    logprob: e.logprob,
    bytes: e.bytes ?? [],
    top_logprobs: e.top_logprobs.map((t) => ({ token: tokenText(t.token, t.bytes), logprob: t.logprob, bytes: t.bytes ?? [] })),
  }));
}

/** The same logprobs as delta and done events carry them (no bytes). */
export function eventLogprobs(logprobs: readonly OutputTextLogprob[]): { token: string; logprob: number; top_logprobs: { token: string; logprob: number }[] }[] {
  return logprobs.map((l) => ({ token: l.token, logprob: l.logprob, top_logprobs: l.top_logprobs.map((t) => ({ token: t.token, logprob: t.logprob })) }));
}

/** Hearth's usage counts no cached or reasoning tokens separately (chat usage does not either): both 0. */
export function responsesUsage(usage: Usage): ResponsesUsage {
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.total_tokens,
  };
}

/** A cut answer (`length`: max_output_tokens or the context) is `incomplete`, as OpenAI reports it. */
export function statusOf(finish: ChatFinishReason | null): Pick<ResponseObject, 'status' | 'incomplete_details'> {
  if (finish === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finish === 'abort') return { status: 'incomplete', incomplete_details: null };
  return { status: 'completed', incomplete_details: null };
}

export function outputTextPart(text: string, logprobs: OutputTextLogprob[]): OutputTextPart {
  return { type: 'output_text', text, annotations: [], logprobs };
}

/** The final response: the skeleton with its output, status and usage. */
export function finishedResponse(skeleton: ResponseObject, output: OutputItem[], finish: ChatFinishReason | null, usage: Usage | null): ResponseObject {
  return { ...skeleton, ...statusOf(finish), output, usage: usage ? responsesUsage(usage) : null };
}

/**
 * The whole answer: the assistant's text as one message item (left out when the model only called tools),
 * then one function_call item per tool call. `logprobs` false leaves the parts' logprobs empty, as OpenAI
 * answers when `include` does not ask for them.
 */
export function responseFromChatCompletion(skeleton: ResponseObject, completion: ChatCompletionResponse, opts: { logprobs: boolean }): ResponseObject {
  const choice = completion.choices[0];
  const calls = choice.message.tool_calls ?? [];
  const output: OutputItem[] = [];
  const text = choice.message.content ?? '';
  if (text !== '' || calls.length === 0) {
    const logprobs = opts.logprobs ? outputLogprobs(choice.logprobs.content) : [];
    output.push({ id: newResponsesId('msg'), type: 'message', status: 'completed', role: 'assistant', content: [outputTextPart(text, logprobs)] });
  }
  for (const call of calls)
    output.push({ id: newResponsesId('fc'), type: 'function_call', status: 'completed', call_id: call.id, name: call.function.name, arguments: call.function.arguments });
  // A cut answer was cut in its last item.
  if (choice.finish_reason === 'length') output[output.length - 1].status = 'incomplete';
  return finishedResponse(skeleton, output, choice.finish_reason, completion.usage);
}
