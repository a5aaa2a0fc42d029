// The runtime's tokenizer + chat template as the ChatTokenizer the training data code needs.
import type { ChatTemplate, ChatMessage as TemplateMessage } from '../../src/runtime/chat-template.js';
import type { Tokenizer } from '../../src/runtime/tokenizer.js';
import type { ChatTokenizer } from './rl-data.js';

export function chatTokenizerFrom(tokenizer: Tokenizer, template: ChatTemplate): ChatTokenizer {
  return {
    async encodeChat(messages, opts) {
      const text = template.render(messages as TemplateMessage[], { tools: opts.tools ?? undefined, addGenerationPrompt: opts.addGenerationPrompt });
      // Templates write their own BOS and special tokens (as transformers' apply_chat_template).
      return tokenizer.encode(text, { addSpecialTokens: false });
    },
    tokenToId: (token) => tokenizer.tokenToId(token),
  };
}
