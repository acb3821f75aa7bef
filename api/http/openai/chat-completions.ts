import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { ApiError, toApiError } from '../../../models/errors.js';
import type { SubmitGate } from '../../services/jobs/job-service.js';
import type { RankedModelView } from '../../services/fleet/ranked-models.js';
import { noLlmWorker, type LlmRunner, type ModelCheck } from '../../services/llm/llm-runner.js';
import { chunkOf, completionOf, finishReasonOf, toolCallDeltas, usageChunkOf, usageOf, type CompletionMeta } from './chat-objects.js';
import { checkChatRequest, toLlmRequest, type ChatCompletionBody } from './chat-request.js';
import { ChunkStream } from './chunk-stream.js';
import { openAiErrorBody } from './openai-error.js';

/** Response header naming the llm job behind a completion (also in the completion id). */
export const RUN_ID_HEADER = 'X-Switchyard-Run-Id';

export interface ChatCompletionsOptions {
  llm: LlmRunner;
  log: Logger;
  /** Interval of `: ping` comments on streams. */
  pingMs: number;
  /** Unsent bytes a streaming client may hold before it is cut off. */
  clientBufferBytes: number;
}

/** What is known of a stream once its job is accepted. */
interface LiveStream {
  stream: ChunkStream;
  meta: CompletionMeta;
  /** The text sent so far, to send only what the deltas missed at the end. */
  streamed: string;
}

const unixNow = () => Math.floor(Date.now() / 1000);

/**
 * The OpenAI-compatible chat surface (docs/openai.md): each completion is one llm job run by
 * `LlmRunner` (a paid job on the fleet), presented as OpenAI's objects or chunk stream.
 */
export class ChatCompletions {
  constructor(private readonly opts: ChatCompletionsOptions) {}

  /** `GET /v1/models`: what the connected llm workers advertise. */
  async listModels() {
    const models = await this.opts.llm.servedModels();
    return { object: 'list', data: models.map((m) => modelObject(m.id, m.ranked)) };
  }

  async retrieveModel(id: string) {
    const models = await this.opts.llm.servedModels();
    const found = models.find((m) => m.id === id);
    if (!found) throw modelNotFound(id, models.map((m) => m.id));
    return modelObject(id, found.ranked);
  }

  /** A finished `chat.completion` and the run id of its job. */
  async complete(accountId: string, body: ChatCompletionBody, signal?: AbortSignal, gate?: SubmitGate) {
    const { request, checked } = await this.prepare(body);
    const created = unixNow();
    const result = await this.opts.llm.run(accountId, request, { signal, checked, gate });
    const meta = { id: completionId(result.run_id), created, model: result.model ?? body.model };
    return { runId: result.run_id, completion: completionOf(meta, request, result) };
  }

  /**
   * Streams one completion as chunks onto the response `open()` hands over, called once the
   * job is accepted. Errors before that are thrown (the route answers them as JSON); after
   * it they end the stream with an error frame.
   */
  async stream(accountId: string, body: ChatCompletionBody, open: () => ServerResponse, signal?: AbortSignal, gate?: SubmitGate): Promise<void> {
    const { request, checked } = await this.prepare(body);
    const created = unixNow();
    let live: LiveStream | undefined;
    try {
      const result = await this.opts.llm.run(accountId, request, {
        signal,
        checked,
        gate,
        onAccepted: (runId) => {
          const meta = { id: completionId(runId), created, model: body.model };
          live = { meta, streamed: '', stream: new ChunkStream(open(), { pingMs: this.opts.pingMs, bufferBytes: this.opts.clientBufferBytes, headers: { [RUN_ID_HEADER]: runId } }) };
          live.stream.send(chunkOf(meta, { role: 'assistant', content: '' }));
        },
        onDelta: (delta) => {
          if (!live) return;
          live.streamed += delta;
          live.stream.send(chunkOf(live.meta, { content: delta }));
        },
      });
      if (!live) throw new Error('the llm step finished without being accepted');
      const { stream, meta, streamed } = live;
      // A worker that streamed nothing (or not all of it) still gets its whole text across.
      const rest = result.text.startsWith(streamed) ? result.text.slice(streamed.length) : '';
      if (rest) stream.send(chunkOf(meta, { content: rest }));
      for (const delta of toolCallDeltas(result.tool_calls)) stream.send(chunkOf(meta, delta));
      stream.send(chunkOf(meta, {}, finishReasonOf(result)));
      if (body.stream_options?.include_usage) stream.send(usageChunkOf(meta, usageOf(request, result)));
      stream.done();
    } catch (thrown) {
      if (!live) throw thrown;
      const err = toApiError(thrown);
      if (err.status >= 500 && err.code !== 'unavailable') this.opts.log.error({ err: err.cause ?? thrown }, 'chat completion stream failed');
      live.stream.fail(openAiErrorBody(err));
    }
  }

  private async prepare(body: ChatCompletionBody) {
    checkChatRequest(body);
    const checked = await this.checkModel(body.model);
    return { request: toLlmRequest(body), checked };
  }

  /**
   * 503 while no llm worker is connected; 404 `model_not_found` for a model the catalogue does
   * not know (OpenAI's answer). A known model no connected worker serves is the runner's 503.
   * One read of the fleet, handed to the runner so that it does not read it again.
   */
  private async checkModel(model: string): Promise<ModelCheck> {
    const checked = await this.opts.llm.check(model);
    // No llm worker at all says more than which model is missing.
    if (!checked.anyWorker) throw noLlmWorker();
    if (checked.availability === 'unknown') throw modelNotFound(model, await this.opts.llm.models());
    return checked;
  }
}

/** OpenAI's answer to a model it does not have: 404, `code: model_not_found`, `param: model`. */
function modelNotFound(model: string, live: string[]): ApiError {
  return new ApiError('model_not_found', `The model \`${model}\` does not exist or you do not have access to it. GET /v1/models lists the models served now: ${live.join(', ') || 'none'}`, {
    details: { param: 'model', models: live },
  });
}

const completionId = (runId: string) => `chatcmpl-${runId}`;

/**
 * Switchyard does not know when a worker's model was made: `created` is 0. A ranked model
 * (docs/ranks.md) also says its ranks, its workers per rank and the pipelines it could form.
 */
const modelObject = (id: string, ranked: RankedModelView | null = null) => ({ id, object: 'model', created: 0, owned_by: 'switchyard', ...ranked });
