import { UsageError } from '../../usage-error.js';
import { stringFlag, type WorkerEngine } from './worker-engine.js';

/**
 * `--engine comfyui`: the kinds of the workflow templates in --workflows, run on a ComfyUI
 * server. Templates that do not parse, a server that does not answer or lacks a node type they
 * use stop the command here (exit 1), before it connects to the gateway: otherwise every job
 * would fail the same way.
 */
export const comfyUiEngine: WorkerEngine = {
  name: 'comfyui',
  flags: { 'comfyui-url': { type: 'string' }, workflows: { type: 'string' } },
  usage: `worker --gateway URL --token T --engine comfyui --comfyui-url URL --workflows DIR [--kinds k1,k2]
                                         a worker in front of a ComfyUI server (e.g.
                                         http://127.0.0.1:8188): each job runs the API-format workflow
                                         template of its kind in DIR (image.generate.json, or
                                         image.generate@MODEL.json for jobs naming MODEL) with the
                                         job's input in its {{placeholders}}; serves the kinds of the
                                         templates (or the --kinds among them) and advertises their
                                         models; exits 1 if a template does not parse, the server
                                         does not answer or lacks a node type they use;
                                         --tier, --slots and --attestation-key as above
                                         (docs/engines.md)`,
  // Every kind is possible; create() narrows them to those the templates serve.
  defaultKinds: ['all'],
  async create({ flags, kinds, models: ids }) {
    const url = stringFlag(flags, 'comfyui-url');
    const dir = stringFlag(flags, 'workflows');
    if (!url) throw new UsageError('--engine comfyui needs --comfyui-url: the ComfyUI server\'s address, e.g. http://127.0.0.1:8188');
    if (!dir) throw new UsageError('--engine comfyui needs --workflows: a folder of workflow templates (docs/engines.md), e.g. sdk/engines/comfyui/workflows');
    if (ids) throw new UsageError('--models is not for --engine comfyui: its models are those of its templates (<kind>@<model>.json)');
    const { KIND_NAMES } = await import('../../../../models/kinds.js');
    const { createComfyUiEngine, templateFileName } = await import('../../../../sdk/engines/comfyui/index.js');
    let engine;
    try {
      engine = createComfyUiEngine({ url, workflows: dir });
    } catch (err) {
      const message = (err as Error).message;
      if (message.startsWith('url must')) throw new UsageError(message.replace(/^url/, '--comfyui-url'));
      throw new Error(`the workflow templates cannot be used: ${message}`);
    }
    const unknown = engine.kinds.filter((k) => !KIND_NAMES.includes(k));
    if (unknown.length) throw new Error(`the workflow templates in ${dir} name unknown kinds (${unknown.join(', ')}); known kinds are named like ${templateFileName(KIND_NAMES[0])}`);
    const explicit = stringFlag(flags, 'kinds') !== undefined && stringFlag(flags, 'kinds')!.trim() !== 'all';
    const missing = explicit ? kinds.filter((k) => !engine.kinds.includes(k)) : [];
    if (missing.length) throw new Error(`no workflow template in ${dir} for ${missing.join(', ')}: add ${missing.map((k) => templateFileName(k)).join(', ')}`);
    const served = explicit ? kinds : engine.kinds;
    const stats = await engine.check().catch(async (err: Error) => {
      await engine.close();
      throw new Error(`ComfyUI at ${url} does not answer: ${err.message}. Start it (python main.py --listen 127.0.0.1 --port 8188) or check --comfyui-url`);
    });
    if (stats.missingNodes.length) {
      await engine.close();
      const list = stats.missingNodes.map((m) => `${m.file} uses ${m.classTypes.join(', ')}`).join('; ');
      throw new Error(`ComfyUI at ${url} lacks node types the templates use (${list}): install those custom nodes or update ComfyUI`);
    }
    const models = Object.fromEntries(served.map((k) => [k, engine.models[k] ?? []]));
    const list = served.map((k) => `${k}${models[k].length ? ` (models: ${models[k].map((m) => m.id).join(', ')})` : ''}`).join('; ');
    console.error(`switchyard worker: serving ${list} with ComfyUI ${stats.comfyui_version ?? ''} at ${url}`.replace(/ +/g, ' '));
    return {
      handler: engine.handler,
      kinds: served,
      models,
      software: { name: 'switchyard-comfyui-engine', engine: 'comfyui', ...(stats.comfyui_version ? { comfyui_version: stats.comfyui_version } : {}) },
      close: engine.close,
      backend: { probe: engine.probe },
    };
  },
};
