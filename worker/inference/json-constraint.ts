// response_format json_object / json_schema (and forced tool calls) enforced while decoding:
// before each sample we compute which vocabulary tokens keep the output a valid prefix of the
// grammar (json-grammar.ts) and mask the rest. Tokens are checked byte by byte through a trie of
// the vocabulary, so a shared prefix ("{\"", "{\"na", …) is walked once and a dead branch is cut
// at its first bad byte. EOS is allowed only when the JSON is complete, so output always parses
// (unless max_tokens cuts it, which finish_reason "length" reports).

import { GrammarState, isPlainStringByte } from './json-grammar.js';
import { ANY_OBJECT, compileSchema, type SchemaNode } from '../../src/domain/json-schema.js';
import type { TokenizerPort } from './model-port.js';
import type { TokenConstraint } from './token-constraint.js';

interface TrieNode {
  children: Map<number, TrieNode>;
  /** Tokens whose bytes end exactly here. */
  tokens: number[];
}

interface Trie extends TrieNode {
  /** Bytes in the longest token. */
  maxDepth: number;
}

const tries = new WeakMap<TokenizerPort, Trie>();

/**
 * Inside a JSON string most tokens are plain text that leaves the grammar state unchanged, and
 * walking the whole trie for them costs ~150 ms per token on a 50k vocabulary. So we index once:
 * the tokens made only of plain string bytes (always allowed inside a string), and the
 * "frontier" edges where a path of plain bytes meets another byte (walked normally).
 */
interface PlainIndex {
  tokens: number[];
  frontier: { byte: number; child: TrieNode }[];
}
const plainIndexes = new WeakMap<TrieNode, PlainIndex>();

function plainIndex(root: TrieNode): PlainIndex {
  let idx = plainIndexes.get(root);
  if (idx) return idx;
  idx = { tokens: [], frontier: [] };
  const stack: TrieNode[] = [root];
  while (stack.length) {
    const node = stack.pop()!;
    for (const [byte, child] of node.children) {
      if (!isPlainStringByte(byte)) {
        idx.frontier.push({ byte, child });
        continue;
      }
      idx.tokens.push(...child.tokens);
      stack.push(child);
    }
  }
  plainIndexes.set(root, idx);
  return idx;
}

/** The vocabulary as a byte trie (built once per tokenizer). Special tokens are left out. */
export function vocabTrie(tokenizer: TokenizerPort): Trie {
  let root = tries.get(tokenizer);
  if (root) return root;
  root = { children: new Map(), tokens: [], maxDepth: 0 };
  for (let id = 0; id < tokenizer.vocabSize; id++) {
    if (tokenizer.isSpecial(id)) continue;
    const bytes = tokenizer.tokenBytes(id);
    if (bytes.length === 0) continue;
    root.maxDepth = Math.max(root.maxDepth, bytes.length);
    let node: TrieNode = root;
    for (const b of bytes) {
      let child = node.children.get(b);
      if (!child) node.children.set(b, (child = { children: new Map(), tokens: [] }));
      node = child;
    }
    node.tokens.push(id);
  }
  tries.set(tokenizer, root);
  return root;
}

export class GrammarConstraint implements TokenConstraint {
  private state: GrammarState;
  private readonly trie: Trie;

  /** `root`: a schema (with optional literal text around it), or a grammar's start state built otherwise. */
  constructor(
    private readonly tokenizer: TokenizerPort,
    root: SchemaNode | GrammarState,
    opts: { prefix?: string; suffix?: string } = {},
  ) {
    this.state = root instanceof GrammarState ? root : GrammarState.start(root, opts.prefix, opts.suffix);
    this.trie = vocabTrie(tokenizer);
  }

  /** Masks by state: a run of plain string tokens keeps the same state, so its mask is reused. */
  private readonly cache = new WeakMap<object, Uint8Array>();

  allowedTokens(): Uint8Array {
    const cached = this.cache.get(this.state.key);
    if (cached) return cached;
    const mask = new Uint8Array(this.tokenizer.vocabSize);
    if (this.state.canEnd) for (const id of this.tokenizer.eosTokenIds) mask[id] = 1;
    if (this.state.plainStringRoom >= this.trie.maxDepth) {
      const idx = plainIndex(this.trie);
      for (const id of idx.tokens) mask[id] = 1;
      for (const { byte, child } of idx.frontier) {
        const next = this.state.feed(byte);
        if (!next) continue;
        for (const id of child.tokens) mask[id] = 1;
        if (child.children.size) walk(child, next, mask);
      }
    } else if (!this.state.isDone) walk(this.trie, this.state, mask);
    this.cache.set(this.state.key, mask);
    return mask;
  }

  advance(tokenId: number): void {
    if (this.tokenizer.eosTokenIds.includes(tokenId)) {
      if (!this.state.canEnd) throw new Error('EOS sampled before the constrained output was complete');
      return;
    }
    const next = this.state.feedBytes(this.tokenizer.tokenBytes(tokenId));
    if (!next || this.tokenizer.isSpecial(tokenId)) throw new Error(`token ${tokenId} violates the output constraint`);
    this.state = next;
  }
}

function walk(node: TrieNode, state: GrammarState, mask: Uint8Array): void {
  for (const [byte, child] of node.children) {
    const next = state.feed(byte);
    if (!next) continue;
    for (const id of child.tokens) mask[id] = 1;
    if (child.children.size) walk(child, next, mask);
  }
}

/** response_format → constraint factory (null for plain text). Throws on unsupported schemas. */
export function responseFormatConstraint(
  tokenizer: TokenizerPort,
  format: { type: 'text' } | { type: 'json_object' } | { type: 'json_schema'; json_schema: { schema?: Record<string, unknown>; strict?: boolean | null } } | null | undefined,
): (() => TokenConstraint) | null {
  if (!format || format.type === 'text') return null;
  const node = format.type === 'json_object' ? ANY_OBJECT : compileSchema(format.json_schema.schema ?? {}, { orderedKeys: format.json_schema.strict === true });
  vocabTrie(tokenizer);
  return () => new GrammarConstraint(tokenizer, node);
}
