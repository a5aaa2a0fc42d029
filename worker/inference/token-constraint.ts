// What the engine needs from a decoding constraint (JSON schema, forced tool call): which tokens
// may come next, and to be told which one was chosen. Implementations: json-constraint.ts.

export interface TokenConstraint {
  /** 1 for every token id allowed next (EOS ids are allowed once the output is complete). */
  allowedTokens(): Uint8Array;
  /** Records the sampled token; throws if it was not allowed. */
  advance(tokenId: number): void;
}
