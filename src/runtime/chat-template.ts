// Chat templates (Jinja, as in tokenizer_config.json) rendered with @huggingface/jinja.
// Models without a template get ChatML. Tokenize the result with addSpecialTokens: false
// (templates write their own BOS), as transformers' apply_chat_template does.
import { Template } from '@huggingface/jinja';

export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export interface ChatMessage {
  role: string;
  content: string | null | unknown;
  [key: string]: unknown;
}

export interface RenderOptions {
  tools?: unknown[];
  addGenerationPrompt?: boolean;
  /** Extra template variables (e.g. enable_thinking). */
  kwargs?: Record<string, unknown>;
}

export class ChatTemplate {
  private readonly template: Template;
  constructor(readonly source: string, private readonly specialTokens: Record<string, string | null>) {
    this.template = new Template(source);
  }

  render(messages: ChatMessage[], opts: RenderOptions = {}): string {
    return this.template.render({
      messages,
      ...(opts.tools ? { tools: opts.tools } : {}),
      add_generation_prompt: opts.addGenerationPrompt ?? false,
      ...this.specialTokens,
      ...(opts.kwargs ?? {}),
    });
  }
}

/** Pick the template from tokenizer_config.json (string, or list of named templates) or fall back to ChatML. */
export function chatTemplateFromConfig(tokenizerConfig: Record<string, any>): ChatTemplate {
  const tokenText = (v: unknown): string | null => (typeof v === 'string' ? v : ((v as { content?: string } | null)?.content ?? null));
  const specials = {
    bos_token: tokenText(tokenizerConfig.bos_token) ?? '',
    eos_token: tokenText(tokenizerConfig.eos_token) ?? '',
    pad_token: tokenText(tokenizerConfig.pad_token),
    unk_token: tokenText(tokenizerConfig.unk_token),
  };
  let source: unknown = tokenizerConfig.chat_template;
  if (Array.isArray(source)) source = source.find((t) => t?.name === 'default')?.template ?? source[0]?.template;
  return new ChatTemplate(typeof source === 'string' && source.length > 0 ? source : CHATML_TEMPLATE, specials);
}
