// Server-sent events as the OpenAI streaming API sends them: `data: <json>` lines, blank line between
// events, `data: [DONE]` at the end. Fed text as it arrives; returns the complete payloads so far.
export class SseParser {
  private buffer = '';

  /** Add received text; returns the `data:` payloads of the events it completed (in order). */
  push(text: string): string[] {
    this.buffer += text.replace(/\r\n?/g, '\n');
    const out: string[] = [];
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) >= 0) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const data = block
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''));
      if (data.length) out.push(data.join('\n'));
    }
    return out;
  }
}
