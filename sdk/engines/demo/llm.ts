import { createHash } from 'node:crypto';
import type { DemoFamily } from './job.js';
import { sleep } from './job.js';
import { int, str } from './inputs.js';
import { canonicalJson } from './seed.js';

interface Message {
  role: string;
  content: string;
}

interface ToolSpec {
  name: string;
  parameters?: { properties?: Record<string, { type?: string }>; required?: string[] };
}

/** Message content is a string or OpenAI-style parts; only the text parts matter here. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (p && typeof p === 'object' && typeof p.text === 'string' ? p.text : '')).join(' ');
  return '';
}

function messagesOf(input: Record<string, unknown>): Message[] {
  const raw = Array.isArray(input.messages) ? input.messages : [];
  const msgs = raw.filter((m): m is Record<string, unknown> => !!m && typeof m === 'object').map((m) => ({ role: String(m.role ?? 'user'), content: textOf(m.content) }));
  const prompt = str(input, 'prompt');
  return prompt ? [...msgs, { role: 'user', content: prompt }] : msgs;
}

/** Accepts OpenAI-style `{type:'function', function:{name, parameters}}` and bare `{name, parameters}` / `{name, inputSchema}`. */
function toolsOf(input: Record<string, unknown>): ToolSpec[] {
  const raw = Array.isArray(input.tools) ? input.tools : [];
  return raw.flatMap((t) => {
    if (typeof t === 'string') return [{ name: t }];
    const f = t && typeof t === 'object' ? ((t.function as Record<string, unknown>) ?? t) : null;
    if (!f || typeof f.name !== 'string') return [];
    return [{ name: f.name, parameters: (f.parameters ?? f.inputSchema) as ToolSpec['parameters'] }];
  });
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const mentions = (text: string, name: string) => new RegExp(`(^|[^\\w:.-])${escape(name)}($|[^\\w:-])`, 'i').test(text);

/**
 * The tool the last user message asks for: "use tool X" names one outright (it must be among the
 * offered tools when tools are offered); otherwise the first offered tool the message mentions.
 */
function requestedTool(text: string, tools: ToolSpec[]): ToolSpec | undefined {
  const asked = text.match(/\buse (?:the )?tool[\s:]+[`"']?([\w:.-]*\w)/i)?.[1];
  if (asked) {
    const offered = tools.find((t) => t.name.toLowerCase() === asked.toLowerCase());
    if (offered || tools.length === 0) return offered ?? { name: asked };
  }
  return tools.find((t) => mentions(text, t.name));
}

/** Arguments that satisfy a simple schema: strings get the user's text, numbers 1, booleans true. */
function argumentsFor(tool: ToolSpec, text: string): Record<string, unknown> {
  const props = tool.parameters?.properties ?? {};
  const names = tool.parameters?.required ?? Object.keys(props);
  const value = (type?: string) => (type === 'number' || type === 'integer' ? 1 : type === 'boolean' ? true : type === 'array' ? [] : type === 'object' ? {} : text.slice(0, 200));
  return Object.fromEntries(names.map((n) => [n, value(props[n]?.type)]));
}

// The demo has no tokenizer: it counts words as tokens, so its usage reports are small and exact.
const countWords = (text: string) => text.split(/\s+/).filter(Boolean).length;

/** What the demo reports about a step, like a real engine would: token counts and the model served. */
function usageReport(input: Record<string, unknown>, messages: Message[], completionTokens: number) {
  const promptTokens = messages.reduce((n, m) => n + countWords(m.content), 0);
  return {
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
    model: str(input, 'model') || 'demo-llm',
  };
}

const FILLER = [
  'This is the demo engine speaking.',
  'No model was loaded to write this.',
  'The words are picked from the request hash, so the same request always gets the same answer.',
  'Real workers would stream tokens from an open LLM here.',
  'Streaming arrives one word at a time.',
];

/** inference:llm:text-generate: a deterministic reply streamed word by word, or a tool call. */
export const llm: DemoFamily = async ({ input, ctx, rng, delayMs }) => {
  const messages = messagesOf(input);
  const last = messages.at(-1);
  const tools = toolsOf(input);
  // Only a fresh user turn may trigger a tool; after a tool result the agent loop needs text.
  const tool = last?.role === 'user' ? requestedTool(last.content, tools) : undefined;
  if (tool) {
    const args = JSON.stringify(argumentsFor(tool, last!.content));
    const id = `call_${createHash('sha256').update(canonicalJson([tool.name, args, messages])).digest('hex').slice(0, 24)}`;
    ctx.log(`demo llm: calling tool ${tool.name}`);
    const report = usageReport(input, messages, countWords(`${tool.name} ${args}`));
    return { artifacts: [], extra: { text: '', tool_calls: [{ id, type: 'function', function: { name: tool.name, arguments: args } }], finish_reason: 'tool_calls', ...report } };
  }

  const topic = (last?.content ?? '').replace(/\s+/g, ' ').trim().slice(0, 80);
  const opening = last?.role === 'tool' ? `The tool returned: ${topic}.` : topic ? `You asked about "${topic}".` : 'Hello.';
  const sentences = [opening, ...Array.from({ length: 2 + rng.int(3) }, () => rng.pick(FILLER))];
  const all = sentences.join(' ').split(' ');
  const maxTokens = int(input, 'max_tokens', 256, 1, 1_000_000);
  const words = all.slice(0, maxTokens);
  // Stream within roughly a quarter of the configured delay, so a demo job still takes ~delayMs overall.
  const perWord = delayMs / 4 / words.length;
  let text = '';
  for (const [i, word] of words.entries()) {
    await sleep(perWord, ctx.signal);
    const delta = i === 0 ? word : ` ${word}`;
    text += delta;
    ctx.output(delta);
  }
  return {
    artifacts: [{ name: 'completion.txt', contentType: 'text/plain; charset=utf-8', data: Buffer.from(text, 'utf8') }],
    extra: { text, finish_reason: words.length < all.length ? 'length' : 'stop', ...usageReport(input, messages, words.length) },
  };
};
