// A toy chat template for trainer unit tests: <role> chars… <end>, with roles system 10 / user 11 / assistant 12 /
// tool 13 and each character 20 + (code % 400), so expected token ids can be written by hand.
import type { ChatMessage, ChatTokenizer } from '../../worker/training/rl-data.js';

export const ROLE: Record<string, number> = { system: 10, user: 11, assistant: 12, tool: 13 };
export const END = 3;
export const chars = (text: string) => [...text].map((c) => 20 + (c.charCodeAt(0) % 400));

export const toyTokenizer: ChatTokenizer = {
  async encodeChat(messages: ChatMessage[], opts) {
    const ids = messages.flatMap((m) => [ROLE[m.role], ...chars(String(m.content ?? '')), END]);
    if (opts.addGenerationPrompt) ids.push(ROLE.assistant);
    return ids;
  },
};
