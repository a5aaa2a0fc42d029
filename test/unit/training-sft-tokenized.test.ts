// Pre-tokenized SFT lines (`{"token_ids", "loss_mask", "weights"?}`, what the native API writes for ART N3's token matrices):
// trained as given, never re-tokenized; malformed lines named; rows with nothing to train and overlong ones counted.
import { describe, expect, it } from 'vitest';
import type { ChatTokenizer } from '../../worker/training/rl-data.js';
import { parseSftJsonl, tokenizeSftRows } from '../../worker/training/sft-data.js';

const refuses: ChatTokenizer = {
  async encodeChat() {
    throw new Error('a pre-tokenized row must not be tokenized again');
  },
};

describe('pre-tokenized SFT rows', () => {
  it('become sequences as they are', async () => {
    const rows = parseSftJsonl(
      [{ token_ids: [1, 5, 6, 2], loss_mask: [0, 0, 1, 1] }, { token_ids: [1, 7], loss_mask: [0, 0] }, { token_ids: [1, 2, 3, 4, 5], loss_mask: [0, 1, 1, 1, 1] }]
        .map((r) => JSON.stringify(r)).join('\n'),
    );
    const out = await tokenizeSftRows(rows, refuses, { maxTokens: 4 });
    // Each sequence names its input row (reports such as token logprobs are aligned with the input by it).
    expect(out.sequences).toEqual([{ ids: [1, 5, 6, 2], lossMask: [0, 0, 1, 1], row: 0 }]);
    expect([out.rowsWithoutAssistant, out.droppedTooLong]).toEqual([1, 1]);
  });

  it('carry per-target loss weights when the line has them', async () => {
    const rows = parseSftJsonl(JSON.stringify({ token_ids: [1, 5, 6, 2], loss_mask: [0, 0, 1, 1], weights: [0, 0, -0.5, 2] }));
    const out = await tokenizeSftRows(rows, refuses);
    expect(out.sequences).toEqual([{ ids: [1, 5, 6, 2], lossMask: [0, 0, 1, 1], tokenWeights: [0, 0, -0.5, 2], row: 0 }]);
  });

  it('names malformed lines', () => {
    expect(() => parseSftJsonl('{"token_ids":[1,2],"loss_mask":[0]}')).toThrow(/line 1: "token_ids" and "loss_mask"/);
    expect(() => parseSftJsonl('{"messages":[]}\n{"token_ids":[1,-2],"loss_mask":[0,1]}')).toThrow(/line 2/);
    expect(() => parseSftJsonl('{"token_ids":[1,2],"loss_mask":[0,1],"weights":[1]}')).toThrow(/line 1: "weights" must be a list of finite numbers, one per token id/);
    expect(() => parseSftJsonl('{"token_ids":[1,2],"loss_mask":[0,1],"weights":[0,"1"]}')).toThrow(/"weights"/);
  });
});
