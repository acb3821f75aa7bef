import { UsageError } from '../../usage-error.js';
import { stringFlag, type WorkerEngine } from './worker-engine.js';

/**
 * `--engine cog`: one kind served by a Replicate Cog container, its model advertised with an
 * input schema made from the container's own. A container that does not become READY, or whose
 * schema the gateway would refuse, stops the command here (exit 1), before it connects.
 */
export const cogEngine: WorkerEngine = {
  name: 'cog',
  flags: { 'cog-url': { type: 'string' }, 'cog-ready-timeout-s': { type: 'string' }, 'cog-webhook-listen': { type: 'string' }, 'cog-webhook-url': { type: 'string' } },
  usage: `worker --gateway URL --token T --engine cog --cog-url URL --kinds KIND [--models ID]
         [--cog-ready-timeout-s N] [--cog-webhook-listen HOST:PORT] [--cog-webhook-url URL]
                                         a worker in front of a Cog container (docker run -p 5000:5000
                                         r8.im/...): waits up to N s (default 300) for its health-check
                                         to say READY, serves the one kind --kinds names with one model
                                         (--models, or a name from its openapi.json) whose input schema
                                         is the container's; Cog reports each prediction to a webhook
                                         the worker listens for on --cog-webhook-listen (default
                                         127.0.0.1 and any free port), reached at --cog-webhook-url
                                         (default the listen address); --tier, --slots and
                                         --attestation-key as above (docs/engines.md)`,
  async create({ flags, kinds, models: ids }) {
    const cogUrl = stringFlag(flags, 'cog-url');
    if (!cogUrl) throw new UsageError('--engine cog needs --cog-url: the Cog container\'s HTTP server, e.g. http://127.0.0.1:5000');
    if (kinds.length !== 1) throw new UsageError(`--engine cog serves one kind, the one its model does: name it with --kinds (not ${kinds.length > 3 ? 'all' : kinds.join(',')})`);
    if (ids && ids.length > 1) throw new UsageError('--engine cog serves one model: give --models one id');
    const timeout = stringFlag(flags, 'cog-ready-timeout-s') ?? '300';
    const readyTimeoutMs = Number(timeout) * 1000;
    if (!Number.isFinite(readyTimeoutMs) || readyTimeoutMs < 0) throw new UsageError('--cog-ready-timeout-s must be a number of seconds >= 0');
    const listen = stringFlag(flags, 'cog-webhook-listen');
    const hostPort = listen === undefined ? undefined : /^(.+):(\d{1,5})$/.exec(listen);
    if (listen !== undefined && (!hostPort || Number(hostPort[2]) > 65535)) throw new UsageError('--cog-webhook-listen must be HOST:PORT, e.g. 0.0.0.0:5055');
    const webhookUrl = stringFlag(flags, 'cog-webhook-url');
    if (webhookUrl !== undefined && !/^https?:\/\/[^/]+/.test(webhookUrl)) throw new UsageError('--cog-webhook-url must be an http(s) URL, e.g. http://host.docker.internal:5055');

    // Loaded here, as the other engines load theirs: `switchyard --help` needs none of it (ajv is large).
    const { fileFields, findKind } = await import('../../../../models/kinds.js');
    const checkModelSchema: typeof import('../../../../models/model-schema.js').checkModelSchema = (await import('../../../../models/model-schema.js')).checkModelSchema;
    const kind = findKind(kinds[0])!;
    const files = fileFields(kind);
    const kindProps = (kind.inputSchema.properties ?? {}) as Record<string, Record<string, unknown>>;
    const { createCogEngine } = await import('../../../../sdk/engines/cog/index.js');
    let engine;
    try {
      engine = await createCogEngine({
        cogUrl,
        kind: kind.kind,
        kindFields: { properties: kindProps, files: Object.fromEntries(Object.keys(files).map((f) => [f, kindProps[f]])) },
        modelId: ids?.[0],
        readyTimeoutMs,
        ...(hostPort ? { webhookListen: { host: hostPort[1].replace(/^\[(.*)\]$/, '$1'), port: Number(hostPort[2]) } } : {}),
        ...(webhookUrl ? { webhookUrl } : {}),
      });
    } catch (err) {
      if (err instanceof TypeError) throw new UsageError(err.message.startsWith('the Cog URL') ? `--cog-url: ${err.message}` : `--models: ${err.message}`);
      throw new Error(`cannot serve the Cog model at ${cogUrl}: ${(err as Error).message}`);
    }
    try {
      // The gateway would refuse the worker's advertisement: say why here, where it can be fixed.
      checkModelSchema(kind, engine.model.input_schema);
    } catch (err) {
      await engine.close();
      throw new Error(`the input schema made from the Cog model's is not one the gateway takes for ${kind.kind}: ${(err as Error).message}`);
    }
    for (const d of engine.dropped) console.error(`switchyard worker: the Cog input "${d.field}" is not offered to jobs: ${d.why}`);
    const fields = Object.keys((engine.model.input_schema!.properties ?? {}) as object);
    console.error(`switchyard worker: serving ${kind.kind} with the Cog model at ${cogUrl} as ${engine.model.id}; inputs: ${fields.join(', ') || 'none'}`);
    return { handler: engine.handler, models: { [kind.kind]: [engine.model] }, software: { name: 'switchyard-cog-engine', engine: 'cog' }, close: engine.close, backend: { probe: engine.probe } };
  },
};
