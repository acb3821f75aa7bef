import type { Logger } from 'pino';
import type { ConversationMessage, SingleAgentDefinition } from '../../../models/bot-types.js';
import { ApiError } from '../../../models/errors.js';
import type { LlmRequest, LlmRunner, LlmToolCall } from '../llm/llm-runner.js';
import type { ToolRecord, ToolService } from '../tools/tool-service.js';

/** One tool call of a turn, as `steps` reports it and the bot socket streams it. */
export interface AgentStep {
  type: 'tool_call';
  /** The bot's `custom:<id>`; null when the LLM named a tool the bot does not have. */
  tool_id: string | null;
  name: string;
  /** As parsed from the LLM's JSON, or its raw text when that was not JSON. */
  arguments: unknown;
  ok: boolean;
  /** The tool's HTTP status, when it answered. */
  status: number | null;
  output: unknown;
  error: { code: string; message: string } | null;
  duration_ms: number;
  /** The llm job that asked for the call. */
  llm_run_id: string;
}

export interface AgentTurn {
  /** Who pays for the LLM steps and owns the tools. */
  accountId: string;
  definition: SingleAgentDefinition;
  /** Earlier messages of the conversation, oldest first. */
  history: ConversationMessage[];
  message: string;
}

export interface AgentHooks {
  onStep?: (step: AgentStep) => void;
  /** Streamed LLM text, as it arrives. */
  onDelta?: (text: string) => void;
  signal?: AbortSignal;
}

export interface AgentLoopOptions {
  llm: Pick<LlmRunner, 'run'>;
  tools: Pick<ToolService, 'resolve' | 'llmTool' | 'call'>;
  /** AGENT_MAX_STEPS: the operator's bound, above whatever a flow asks for. */
  maxSteps: number;
  log: Logger;
}

/** Largest tool result handed back to the LLM, in characters: it pays for every one. */
export const TOOL_MESSAGE_MAX_CHARS = 48 * 1024;

type Message = LlmRequest['messages'][number];

/**
 * The single-agent loop: each step is one llm job given the bot's tools; a text answer ends the
 * turn, tool calls are made (arguments checked against the tool's inputSchema by the tool
 * service) and their results fed back for the next step. At most `maxSteps` LLM steps, then
 * `max_steps`.
 */
export class AgentLoop {
  constructor(private readonly opts: AgentLoopOptions) {}

  async run(turn: AgentTurn, hooks: AgentHooks = {}): Promise<{ reply: string; steps: AgentStep[] }> {
    const { definition } = turn;
    const tools = await this.resolveTools(turn.accountId, definition.tools);
    const specs = tools.map((t) => this.opts.tools.llmTool(t.record));
    const byName = new Map(specs.map((spec, i) => [spec.function.name, tools[i]]));
    const messages: Message[] = [
      ...(definition.systemPrompt ? [{ role: 'system', content: definition.systemPrompt }] : []),
      ...turn.history.map((m) => ({ role: m.role, content: m.content })),
      { role: 'user', content: turn.message },
    ];
    const steps: AgentStep[] = [];
    const limit = Math.min(definition.maxSteps, this.opts.maxSteps);
    for (let i = 0; i < limit; i++) {
      const request: LlmRequest = { messages, model: definition.model, ...(specs.length ? { tools: specs } : {}) };
      const result = await this.opts.llm.run(turn.accountId, request, { onDelta: hooks.onDelta, signal: hooks.signal });
      if (result.tool_calls.length === 0) return { reply: result.text, steps };
      messages.push({ role: 'assistant', content: result.text || null, tool_calls: result.tool_calls });
      // One after another, in the LLM's order: the steps stream in the order they are listed.
      for (const [n, call] of result.tool_calls.entries()) {
        // An LLM (or whoever steers it through a public bot) may ask for many calls at once;
        // past the cap the call is answered as refused instead of made.
        const step = n < MAX_CALLS_PER_STEP ? await this.callTool(call, byName, result.run_id, hooks.signal) : tooMany(call, byName, result.run_id);
        steps.push(step);
        hooks.onStep?.(step);
        messages.push({ role: 'tool', tool_call_id: call.id, content: toolMessage(step) });
      }
    }
    throw new ApiError('max_steps', `the bot took ${limit} LLM step${limit === 1 ? '' : 's'} without reaching an answer`, {
      details: { max_steps: limit, steps },
    });
  }

  /**
   * The bot's tools as they are now. A tool deleted since the bot was created is left out (the
   * bot keeps answering without it) rather than failing every turn; it is logged.
   */
  private async resolveTools(accountId: string, ids: string[]): Promise<Array<{ id: string; record: ToolRecord }>> {
    const found = await Promise.all(
      ids.map(async (id) => {
        try {
          const [record] = await this.opts.tools.resolve(accountId, [id]);
          return { id, record };
        } catch (err) {
          if (!(err instanceof ApiError) || err.code !== 'unknown_tool') throw err;
          this.opts.log.warn({ accountId, toolId: id }, 'a bot names a tool that no longer exists; the turn runs without it');
          return null;
        }
      }),
    );
    return found.filter((t) => t !== null);
  }

  private async callTool(call: LlmToolCall, byName: Map<string, { id: string; record: ToolRecord }>, runId: string, signal?: AbortSignal): Promise<AgentStep> {
    const tool = byName.get(call.function.name);
    const raw = call.function.arguments;
    const step = { type: 'tool_call' as const, tool_id: tool?.id ?? null, name: call.function.name, llm_run_id: runId };
    if (!tool) {
      const error = { code: 'unknown_tool', message: `this bot has no tool named ${JSON.stringify(call.function.name)}` };
      return { ...step, arguments: raw, ok: false, status: null, output: null, error, duration_ms: 0 };
    }
    let args: unknown;
    try {
      args = raw === '' ? {} : JSON.parse(raw);
    } catch {
      const error = { code: 'invalid_arguments', message: 'the arguments are not valid JSON' };
      return { ...step, arguments: raw, ok: false, status: null, output: null, error, duration_ms: 0 };
    }
    const result = await this.opts.tools.call(tool.record, args, { signal });
    return { ...step, arguments: args, ok: result.ok, status: result.status, output: result.output, error: result.error, duration_ms: result.duration_ms };
  }
}

/** The tool result as the LLM reads it: JSON, cut to TOOL_MESSAGE_MAX_CHARS. */
function toolMessage(step: AgentStep): string {
  const text = JSON.stringify({ ok: step.ok, status: step.status, output: step.output ?? null, error: step.error });
  return text.length <= TOOL_MESSAGE_MAX_CHARS ? text : `${text.slice(0, TOOL_MESSAGE_MAX_CHARS)}... (cut: the result was ${text.length} characters)`;
}

/** Tool calls made per LLM step; more in one answer are refused (the LLM sees why). */
const MAX_CALLS_PER_STEP = 8;

function tooMany(call: LlmToolCall, byName: Map<string, { id: string; record: ToolRecord }>, runId: string): AgentStep {
  return {
    type: 'tool_call',
    tool_id: byName.get(call.function.name)?.id ?? null,
    name: call.function.name,
    llm_run_id: runId,
    arguments: call.function.arguments,
    ok: false,
    status: null,
    output: null,
    error: { code: 'too_many_calls', message: `at most ${MAX_CALLS_PER_STEP} tool calls are made per step; ask for the rest in the next one` },
    duration_ms: 0,
  };
}
