/**
 * Reading a stream's content chunks without JSON.parse, where that gives exactly what parsing
 * would. A server writes every content chunk of a stream from one template: the same id,
 * created, model, index and nulls, only the text differs (`{"id":"c1",...,"delta":{"content":"` +
 * text + `"},"finish_reason":null}]}`). Once a parsed chunk has shown where its text sits, a later
 * chunk that is that template around a text needing no JSON escape is that text: JSON.parse of
 * the whole would give the template's object with only this one string changed. JSON.parse was
 * most of the engine's CPU per token (docs/benchmarks.md, "stream").
 *
 * Exactness rests on three checks. The learnt chunk is one whose only effects on the completion
 * (CompletionBuilder.addChunk) are its text and its `model`, and a chunk read through it gets both
 * (addPlainContent). The text's place is proven, not guessed: the chunk is parsed once more with
 * one character added to the text there, and that character must show in the text the builder
 * reads (`choices[0].delta.content`, the last of repeated keys): one character added inside one
 * string changes that string only. And a text is taken only when it holds no `"`, `\` or control
 * character, so that `"text"` is a JSON string whose value is the text itself. Anything else (a
 * tool call fragment, the finishing chunk, usage, escapes, an `error` event) is parsed as before.
 */

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What a JSON string may not hold unescaped. */
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;

/**
 * Learning parses a chunk a second time; a stream whose chunks each differ (a counter in every
 * chunk) stops trying after this many.
 */
const MAX_LEARNT = 4;

/**
 * The text of a chunk whose only effects on a completion (CompletionBuilder.addChunk) are its
 * text and its `model`: no usage; a first choice of index 0 (the one the builder reads) without
 * finish_reason or tool calls. An error chunk never gets here: addChunk throws on it first.
 */
function plainContent(chunk: unknown): string | undefined {
  if (!isObject(chunk) || (chunk.usage !== undefined && chunk.usage !== null)) return undefined;
  const choices = chunk.choices;
  if (!Array.isArray(choices)) return undefined;
  const choice = choices[0];
  if (!isObject(choice) || (choice.index ?? 0) !== 0 || (choice.finish_reason !== undefined && choice.finish_reason !== null)) return undefined;
  const delta = choice.delta;
  if (!isObject(delta) || delta.tool_calls !== undefined || typeof delta.content !== 'string') return undefined;
  return delta.content;
}

export class ContentChunks {
  private prefix: string | null = null;
  private suffix = '';
  private learnt = 0;
  /** The learnt chunk's `model`, which addChunk would set again for each chunk read through it. */
  model: string | undefined;

  /** The content of `data` when it is the learnt template around a plain text; undefined: parse it. */
  contentOf(data: string): string | undefined {
    const { prefix, suffix } = this;
    if (prefix === null || data.length < prefix.length + suffix.length) return undefined;
    // Compared as slices: startsWith walks a long prefix many times slower on Node 20.
    if (data.slice(0, prefix.length) !== prefix || data.slice(data.length - suffix.length) !== suffix) return undefined;
    const content = data.slice(prefix.length, data.length - suffix.length);
    return NEEDS_ESCAPE.test(content) ? undefined : content;
  }

  /** After `data` was parsed into `chunk` and read by the builder without error: learn its template if it is a plain content chunk. */
  learn(data: string, chunk: unknown): void {
    if (this.learnt >= MAX_LEARNT) return;
    const content = plainContent(chunk);
    if (content === undefined || NEEDS_ESCAPE.test(content)) return;
    this.learnt++;
    const quoted = `"${content}"`;
    // Where the text sits is proven, not guessed: from the end (content comes late in a chunk),
    // each place holding the same quoted text is tried with another text put there.
    for (let at = data.lastIndexOf(quoted), tries = 0; at >= 0 && tries < 3; at = at === 0 ? -1 : data.lastIndexOf(quoted, at - 1), tries++) {
      const prefix = data.slice(0, at + 1);
      const suffix = data.slice(at + quoted.length - 1);
      const probe = `${content}#`;
      let reparsed: unknown;
      try {
        reparsed = JSON.parse(prefix + probe + suffix);
      } catch {
        continue;
      }
      if (plainContent(reparsed) !== probe) continue;
      this.prefix = prefix;
      this.suffix = suffix;
      this.model = isObject(chunk) && typeof chunk.model === 'string' && chunk.model ? chunk.model : undefined;
      return;
    }
  }
}
