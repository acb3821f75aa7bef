import { RUN_ID_HEADER, type ChatCompletions } from '../openai/chat-completions.js';
import type { ChatCompletionBody } from '../openai/chat-request.js';
import * as O from '../../contract/openai-schemas.js';
import type { RouteSpec } from '../route-spec.js';

export interface OpenAiRoutesOptions {
  openai: ChatCompletions;
}

/** OpenAI-compatible routes (docs/openai.md): errors in OpenAI's shape, account key as Bearer. */
export function openaiRoutes({ openai }: OpenAiRoutesOptions): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/v1/chat/completions',
      operationId: 'createChatCompletion',
      summary: 'OpenAI-compatible chat completion, run as one llm job',
      tag: 'openai',
      auth: 'account',
      // The llm job's create runs the request's gate, in its own script when it can (as POST /v1/jobs).
      gateInHandler: true,
      errorStyle: 'openai',
      body: O.chatCompletionBody,
      responses: {
        200: {
          description:
            '`stream` false: a `chat.completion`. `stream` true: text/event-stream of `data: {chat.completion.chunk}` frames, ' +
            'a usage chunk if `stream_options.include_usage`, then `data: [DONE]`; an error after the stream started is a `data: {error}` frame.',
          schema: O.chatCompletion,
          headers: { [RUN_ID_HEADER]: 'Run id of the llm job' },
        },
        402: { description: 'Balance short of the llm price' },
        404: { description: 'No connected worker serves the model' },
        503: { description: 'No llm worker is connected, or the step failed or timed out' },
      },
      async handler(ctx) {
        const body = ctx.state.body as ChatCompletionBody;
        const accountId = ctx.state.principal!.accountId;
        // A caller that hangs up cancels its llm job rather than paying for an unread answer.
        const gone = new AbortController();
        ctx.res.once('close', () => ctx.res.writableFinished || gone.abort());
        if (body.stream === true) {
          // From acceptance on, the response is a stream written by ChunkStream, not a Koa body.
          const takeOver = () => {
            ctx.status = 200; // so nothing downstream mistakes the handed-over response for a missing route
            ctx.respond = false;
            return ctx.res;
          };
          await openai.stream(accountId, body, takeOver, gone.signal, ctx.state.gate);
          return;
        }
        const { runId, completion } = await openai.complete(accountId, body, gone.signal, ctx.state.gate);
        ctx.set(RUN_ID_HEADER, runId);
        ctx.body = completion;
      },
    },
    {
      method: 'get',
      path: '/v1/models',
      operationId: 'listModels',
      summary: 'Models served by the connected llm workers (OpenAI-compatible)',
      tag: 'openai',
      auth: 'account',
      errorStyle: 'openai',
      responses: { 200: { description: 'The models (empty while no llm worker is connected)', schema: O.modelList } },
      async handler(ctx) {
        ctx.body = await openai.listModels();
      },
    },
    {
      method: 'get',
      path: '/v1/models/{model}',
      operationId: 'retrieveModel',
      summary: 'One model served by the connected llm workers (OpenAI-compatible)',
      tag: 'openai',
      auth: 'account',
      errorStyle: 'openai',
      responses: { 200: { description: 'The model', schema: O.model }, 404: { description: 'No connected worker serves it' } },
      async handler(ctx) {
        ctx.body = await openai.retrieveModel(ctx.params.model);
      },
    },
  ];
}
