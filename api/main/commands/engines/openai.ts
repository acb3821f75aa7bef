import { UsageError } from '../../usage-error.js';
import { stringFlag, type WorkerEngine } from './worker-engine.js';

const LLM_KIND = 'inference:llm:text-generate';

/**
 * `--engine openai`: the llm kind served by an OpenAI-compatible backend, advertising the
 * models named by --models or else those the backend lists. A backend that cannot be asked, or
 * lists none, stops the command here (exit 1), before it connects to the gateway.
 */
export const openAiEngine: WorkerEngine = {
  name: 'openai',
  flags: { 'backend-url': { type: 'string' }, 'backend-key': { type: 'string' } },
  usage: `worker --gateway URL --token T --engine openai --backend-url URL [--backend-key K] [--models m1,m2]
                                         an llm worker in front of an OpenAI-compatible inference server
                                         (vLLM, llama-server, Ollama, LM Studio, TGI): --backend-url is
                                         its base URL with /v1 (e.g. http://127.0.0.1:8000/v1), the key
                                         (or SWITCHYARD_BACKEND_KEY) is sent to it as a bearer; without
                                         --models it serves the models the server's /v1/models lists,
                                         and exits 1 if it cannot be asked or lists none; --tier, --slots
                                         and --attestation-key as above (docs/engines.md)`,
  defaultKinds: [LLM_KIND],
  onlyKinds: [LLM_KIND],
  async create({ flags, env, models: ids }) {
    const backendUrl = stringFlag(flags, 'backend-url');
    if (!backendUrl) throw new UsageError('--engine openai needs --backend-url: the OpenAI base URL of the inference server, e.g. http://127.0.0.1:8000/v1');
    const { createOpenAiEngine } = await import('../../../../sdk/engines/openai/index.js');
    let engine;
    try {
      engine = createOpenAiEngine({ backendUrl, apiKey: stringFlag(flags, 'backend-key') ?? env.SWITCHYARD_BACKEND_KEY ?? undefined, models: ids });
    } catch (err) {
      const message = (err as Error).message;
      throw new UsageError(message.startsWith('backendUrl') ? message.replace('backendUrl', '--backend-url') : `--models: ${message}`);
    }
    const models = await engine.listModels().catch((err: Error) => {
      throw new Error(`cannot list the models of the backend at ${backendUrl}: ${err.message}. Start the server, check --backend-url (it ends in /v1) and --backend-key, or name its models with --models`);
    });
    console.error(`switchyard worker: serving ${LLM_KIND} with the backend at ${backendUrl}; models: ${models.map((m) => m.id).join(', ')}`);
    return { handler: engine.handler, models: { [LLM_KIND]: models }, software: { name: 'switchyard-openai-engine', engine: 'openai' }, backend: { probe: engine.probe } };
  },
};
