// Streaming Hermes tool calls as they are decoded: content passes through until `<tool_call>` may begin (the
// client never sees the markup); inside a block, once `{"name": "…", "arguments": ` has been read, the call's
// id and name go out, then its arguments text delta by delta as the model writes it (OpenAI streams
// `tool_calls[i].function.arguments` the same way, so clients can show arguments as they grow). A block that
// does not begin like that (keys in another order, not JSON) is held whole and parsed at its end.
//
// Unlike parseToolCalls (whole responses), arguments already sent cannot be taken back: a call whose
// arguments turn out malformed stays a call (vLLM's hermes stream parser behaves the same). A stream cut by
// max_tokens ends with the partial call as generated, as OpenAI's does.

import { longestPartialSuffix } from './stop.js';
import { newToolCallId, parseToolCalls, TOOL_CALL_CLOSE, TOOL_CALL_OPEN, type ToolCall } from './tool-calls.js';

/** One element of a chunk's `delta.tool_calls`: the first for a call carries id, type and name. */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

export interface StreamedPiece {
  content: string;
  toolCalls: ToolCallDelta[];
}

/** Where the reader is inside `{"name": "…", "arguments": …`. */
type HeadPhase = 'open' | 'name-key' | 'name-colon' | 'name-start' | 'name' | 'comma' | 'args-key' | 'args-colon';

interface Head {
  phase: HeadPhase;
  /** The key read so far, quotes included. */
  key: string;
  /** The name's JSON text so far, without quotes. */
  name: string;
  escaped: boolean;
  /** Everything read of the block, to parse it whole if it turns out not to begin like a call. */
  raw: string;
}

interface ArgsScan {
  /** Nesting depth of objects/arrays; -1 before the value starts. */
  depth: number;
  inString: boolean;
  escaped: boolean;
  scalar: boolean;
  done: boolean;
}

const isBlank = (c: string): boolean => c === ' ' || c === '\n' || c === '\t' || c === '\r';

export class ToolCallStreamer {
  /** Text not yet sent: a possible start of `<tool_call>` or `</tool_call>`, or a whole opaque block. */
  private held = '';
  private mode: 'content' | 'head' | 'args' | 'tail' | 'opaque' = 'content';
  private head: Head = freshHead();
  private args: ArgsScan = freshArgs();
  /** The call whose arguments are being read (null past maxCalls). */
  private current: ToolCall | null = null;
  /** Calls sent or being sent, whole (what a non-streamed answer would hold). */
  readonly calls: ToolCall[] = [];

  constructor(private readonly maxCalls = Infinity) {}

  push(text: string): StreamedPiece {
    const out: StreamedPiece = { content: '', toolCalls: [] };
    let rest = this.held + text;
    this.held = '';
    while (rest.length) rest = this.step(rest, out);
    return out;
  }

  /**
   * The end of the text. `cut` (finish_reason "length"): a call in progress is kept as far as it was generated.
   * Otherwise a block that never began like a call, or does not parse, is handed back as content when no call
   * went out before it (as parseToolCalls leaves malformed output as content).
   */
  finish(cut: boolean): StreamedPiece {
    const out: StreamedPiece = { content: '', toolCalls: [] };
    const held = this.held;
    this.held = '';
    const mode = this.mode;
    this.mode = 'content';
    if (mode === 'content') {
      if (!this.calls.length) out.content = held;
      return out;
    }
    if (mode === 'head' && cut && this.nameBegun()) {
      this.emitWhole({ id: newToolCallId(), type: 'function', function: { name: jsonStringText(this.head.name), arguments: '' } }, out);
      return out;
    }
    if (mode === 'head' || mode === 'opaque') {
      const block = TOOL_CALL_OPEN + (mode === 'head' ? this.head.raw : held);
      const parsed = parseToolCalls(block);
      for (const call of parsed.toolCalls) this.emitWhole(call, out);
      if (!parsed.toolCalls.length && !this.calls.length) out.content = block;
    }
    return out; // args or tail: the call went out as it was generated
  }

  /** Consumes some of `text` and returns what is left. */
  private step(text: string, out: StreamedPiece): string {
    switch (this.mode) {
      case 'content': {
        const at = text.indexOf(TOOL_CALL_OPEN);
        // After the first call only further calls count (parseToolCalls drops text between blocks too).
        const keep = (s: string) => {
          if (!this.calls.length) out.content += s;
        };
        if (at >= 0) {
          keep(text.slice(0, at));
          this.mode = 'head';
          this.head = freshHead();
          return text.slice(at + TOOL_CALL_OPEN.length);
        }
        const hold = longestPartialSuffix(text, [TOOL_CALL_OPEN]);
        keep(text.slice(0, text.length - hold));
        this.held = text.slice(text.length - hold);
        return '';
      }
      case 'head':
        return this.readHead(text, out);
      case 'args':
        return this.readArgs(text, out);
      case 'tail': {
        // `}` and blanks after the arguments, then `</tool_call>` (or the end of the text).
        const at = text.indexOf(TOOL_CALL_CLOSE);
        if (at < 0) {
          this.held = text.slice(text.length - longestPartialSuffix(text, [TOOL_CALL_CLOSE]));
          return '';
        }
        this.mode = 'content';
        return text.slice(at + TOOL_CALL_CLOSE.length);
      }
      case 'opaque': {
        const at = text.indexOf(TOOL_CALL_CLOSE);
        if (at < 0) {
          this.held = text;
          return '';
        }
        const block = `${TOOL_CALL_OPEN}${text.slice(0, at)}${TOOL_CALL_CLOSE}`;
        const parsed = parseToolCalls(block);
        for (const call of parsed.toolCalls) this.emitWhole(call, out);
        if (!parsed.toolCalls.length && !this.calls.length) out.content += block; // not a call after all
        this.mode = 'content';
        return text.slice(at + TOOL_CALL_CLOSE.length);
      }
    }
  }

  /** Reads `{"name": "…", "arguments": ` character by character; anything else makes the block opaque. */
  private readHead(text: string, out: StreamedPiece): string {
    const h = this.head;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      h.raw += c;
      let ok = true;
      switch (h.phase) {
        case 'open':
          if (c === '{') h.phase = 'name-key';
          else ok = isBlank(c);
          break;
        case 'name-key':
        case 'args-key': {
          if (isBlank(c) && h.key === '') break;
          h.key += c;
          const want = h.phase === 'name-key' ? '"name"' : '"arguments"';
          if (!want.startsWith(h.key)) ok = false;
          else if (h.key === want) {
            h.phase = h.phase === 'name-key' ? 'name-colon' : 'args-colon';
            h.key = '';
          }
          break;
        }
        case 'name-colon':
        case 'args-colon':
          if (c === ':') {
            if (h.phase === 'args-colon') {
              this.startCall(out);
              return text.slice(i + 1);
            }
            h.phase = 'name-start';
          } else ok = isBlank(c);
          break;
        case 'name-start':
          if (c === '"') h.phase = 'name';
          else ok = isBlank(c);
          break;
        case 'name':
          if (h.escaped) h.escaped = false;
          else if (c === '\\') h.escaped = true;
          else if (c === '"') {
            h.phase = 'comma';
            break;
          }
          h.name += c;
          break;
        case 'comma':
          if (c === ',') h.phase = 'args-key';
          else ok = isBlank(c);
          break;
      }
      if (!ok) {
        this.mode = 'opaque';
        return h.raw + text.slice(i + 1); // held whole from the block's start
      }
    }
    return '';
  }

  private nameBegun(): boolean {
    return ['name', 'comma', 'args-key', 'args-colon'].includes(this.head.phase);
  }

  private startCall(out: StreamedPiece): void {
    this.mode = 'args';
    this.args = freshArgs();
    this.current = null;
    if (this.calls.length >= this.maxCalls) return;
    const name = jsonStringText(this.head.name);
    this.current = { id: newToolCallId(), type: 'function', function: { name, arguments: '' } };
    this.calls.push(this.current);
    out.toolCalls.push({ index: this.calls.length - 1, id: this.current.id, type: 'function', function: { name, arguments: '' } });
  }

  /** Sends the arguments' text up to the end of their JSON value; what follows is the block's tail. */
  private readArgs(text: string, out: StreamedPiece): string {
    const a = this.args;
    let from = 0;
    let i = 0;
    for (; i < text.length && !a.done; i++) {
      const c = text[i];
      if (a.depth < 0 && !a.scalar && !a.inString) {
        if (isBlank(c)) {
          from = i + 1;
          continue;
        }
        if (c === '{' || c === '[') a.depth = 1;
        else if (c === '"') {
          a.inString = true;
          a.depth = 0;
        } else a.scalar = true;
        continue;
      }
      if (a.scalar) {
        if (c === '}' || c === ',' || c === '<' || isBlank(c)) {
          a.done = true;
          i--; // not part of the value
        }
        continue;
      }
      if (a.inString) {
        if (a.escaped) a.escaped = false;
        else if (c === '\\') a.escaped = true;
        else if (c === '"') {
          a.inString = false;
          if (a.depth === 0) a.done = true;
        }
        continue;
      }
      if (c === '"') a.inString = true;
      else if (c === '{' || c === '[') a.depth++;
      else if (c === '}' || c === ']') {
        a.depth--;
        if (a.depth === 0) a.done = true;
      }
    }
    this.appendArgs(text.slice(from, i), out);
    if (a.done) {
      this.mode = 'tail';
      return text.slice(i);
    }
    return '';
  }

  private appendArgs(piece: string, out: StreamedPiece): void {
    if (!piece || !this.current) return;
    this.current.function.arguments += piece;
    const index = this.calls.length - 1;
    const last = out.toolCalls[out.toolCalls.length - 1];
    if (last?.index === index) last.function.arguments += piece;
    else out.toolCalls.push({ index, function: { arguments: piece } });
  }

  private emitWhole(call: ToolCall, out: StreamedPiece): void {
    if (this.calls.length >= this.maxCalls) return;
    this.calls.push(call);
    out.toolCalls.push({ index: this.calls.length - 1, id: call.id, type: 'function', function: { name: call.function.name, arguments: call.function.arguments } });
  }
}

function freshHead(): Head {
  return { phase: 'open', key: '', name: '', escaped: false, raw: '' };
}

function freshArgs(): ArgsScan {
  return { depth: -1, inString: false, escaped: false, scalar: false, done: false };
}

/** A JSON string's text (without quotes) as the string it stands for; as written when it does not parse (cut). */
function jsonStringText(text: string): string {
  try {
    return JSON.parse(`"${text}"`) as string;
  } catch {
    return text;
  }
}

/** The calls of a whole text cut by max_tokens, the last one as far as it was generated. */
export function partialToolCalls(text: string, maxCalls = Infinity): { content: string | null; toolCalls: ToolCall[] } {
  const s = new ToolCallStreamer(maxCalls);
  const a = s.push(text);
  const b = s.finish(true);
  const content = a.content + b.content;
  return { content: content.trim() === '' ? null : content, toolCalls: s.calls };
}
