import { withUsage } from '../usage.js';
import { readFile } from 'node:fs/promises';
import { MODEL_ID_PATTERN, type WorkerModel } from '../../protocol/index.js';
import type { Engine, EngineArtifact, EngineContext, EngineResult } from '../types.js';
import { ComfyClient } from './comfy-client.js';
import { ComfySocket } from './comfy-socket.js';
import { artifactNames, contentTypeOf, outputFilesOf, pngSize } from './output-files.js';
import { runPrompt } from './prompt-run.js';
import { bindWorkflow } from './workflow-binding.js';
import { TemplateError, TemplateSet, loadTemplates, type WorkflowTemplate } from './workflow-templates.js';

export { UpstreamError, type UpstreamErrorCode } from '../upstream-error.js';
export { BindError, bindWorkflow } from './workflow-binding.js';
export { TemplateError, loadTemplates, parseTemplate, templateFileName, type ApiGraph, type WorkflowTemplate } from './workflow-templates.js';

export interface ComfyUiEngineOptions {
  /** ComfyUI's address: `http://127.0.0.1:8188` (its default port). */
  url: string;
  /** The workflow templates: a folder of them (workflow-templates.ts names the files), or the templates themselves. */
  workflows: string | WorkflowTemplate[];
  /** @defaultValue the global fetch (Node's) */
  fetch?: typeof fetch;
}

export interface ComfyUiEngine {
  handler: Engine;
  /** The kinds of the templates. */
  kinds: string[];
  /** Per kind, the models of its per-model templates (a kind with a default template only advertises none). */
  models: Record<string, WorkerModel[]>;
  /**
   * Asks the server (`GET /system_stats`, `GET /object_info`): its version, and per template the
   * node types it lacks (a custom node not installed), which ComfyUI would refuse every job of.
   * Rejects with an UpstreamError if it does not answer as ComfyUI.
   */
  check(): Promise<{ comfyui_version?: string; missingNodes: Array<{ file: string; classTypes: string[] }> }>;
  /** Closes the WebSocket. */
  close(): Promise<void>;
  /** Resolves while the server answers `GET /system_stats`; the worker asks it after a lease found the server gone (`backend.probe`). */
  probe(): Promise<void>;
}

const MODEL_ID = new RegExp(MODEL_ID_PATTERN);

/**
 * An engine that runs jobs on a ComfyUI server: each job binds its kind's (and model's) workflow
 * template to its input, uploads its input files, queues the graph with `POST /prompt`, follows
 * it over the WebSocket and returns every file the prompt wrote (docs/engines.md "comfyui").
 */
export function createComfyUiEngine(opts: ComfyUiEngineOptions): ComfyUiEngine {
  const base = serverBase(opts.url);
  const templates = new TemplateSet(typeof opts.workflows === 'string' ? loadTemplates(opts.workflows) : opts.workflows);
  const badModel = templates.templates.find((t) => t.model !== null && !MODEL_ID.test(t.model));
  if (badModel) throw new TemplateError(`${badModel.file}: ${JSON.stringify(badModel.model)} is not a model id (letters, digits and ._:@+-, starting with a letter or digit)`);
  const client = new ComfyClient(base, opts.fetch);
  const socket = new ComfySocket(base);

  const handler: Engine = async (kind, input, ctx): Promise<EngineResult> => {
    const model = typeof input.model === 'string' && input.model !== '' ? input.model : undefined;
    const template = templates.pick(kind, model);
    if (!template) {
      // Routing sends a worker only the kinds and models it advertised: another worker may have this one.
      const what = model ? `model ${model} of ${kind}` : kind;
      throw Object.assign(new Error(`this comfyui worker has no workflow template for ${what}`), { code: 'unsupported_kind', retryable: true });
    }
    const files = await uploadInputs(template, ctx);
    const graph = bindWorkflow(template.graph, input, files, template.file);
    const { promptId, history } = await runPrompt(client, socket, graph, ctx);
    const outputs = outputFilesOf(history);
    if (outputs.length === 0) {
      throw Object.assign(new Error(`ComfyUI prompt ${promptId} wrote no file: does ${template.file} end in a saving node (SaveImage, SaveGLB, SaveAudio...)?`), { code: 'upstream_error', retryable: false });
    }
    const names = artifactNames(outputs);
    const artifacts: EngineArtifact[] = [];
    for (const [i, f] of outputs.entries()) {
      ctx.signal.throwIfAborted();
      const { data, contentType } = await client.view(f);
      artifacts.push({ name: names[i], contentType: contentTypeOf(f.filename, contentType), data });
    }
    ctx.progress(1);
    const size = artifacts.map((a) => (a.contentType === 'image/png' ? pngSize(a.data) : null)).find(Boolean);
    return withUsage(kind, { artifacts, extra: { ...(size ?? {}), comfyui: { prompt_id: promptId, template: template.file.split(/[\\/]/).pop() } } });
  };

  /** Each `{{file:field}}` of the template: the job's file sent to ComfyUI's input folder. */
  async function uploadInputs(template: WorkflowTemplate, ctx: EngineContext): Promise<Record<string, string>> {
    const names: Record<string, string> = {};
    for (const field of template.fileFields) {
      const file = await ctx.inputFile(field);
      // Named by content: ComfyUI keeps one copy of a file sent twice (server.py compares hashes).
      const name = `switchyard-${file.sha256.slice(0, 32)}${extensionOf(file.contentType)}`;
      names[field] = await client.upload(await readFile(file.path), name, file.contentType);
    }
    return names;
  }

  const models: Record<string, WorkerModel[]> = Object.fromEntries(templates.kinds().map((k) => [k, templates.models(k).map((id) => ({ id }))]));
  const check = async () => {
    const { comfyui_version } = await client.systemStats();
    const known = await client.nodeTypes();
    const missingNodes = templates.templates
      .map((t) => ({ file: t.file, classTypes: [...new Set(Object.values(t.graph).map((n) => n.class_type))].filter((c) => !known.has(c)) }))
      .filter((m) => m.classTypes.length > 0);
    return { comfyui_version, missingNodes };
  };
  const probe = async () => {
    await client.systemStats();
  };
  return { handler, kinds: templates.kinds(), models, check, close: () => socket.close(), probe };
}

const EXTENSIONS: Record<string, string> = { 'image/png': '.png', 'image/jpeg': '.jpg', 'image/webp': '.webp', 'model/gltf-binary': '.glb', 'audio/wav': '.wav', 'audio/mpeg': '.mp3', 'audio/ogg': '.ogg', 'audio/flac': '.flac' };
const extensionOf = (contentType: string) => EXTENSIONS[contentType.split(';')[0].trim().toLowerCase()] ?? '';

/** The base URL without its trailing slash; only http(s). */
function serverBase(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`url must be ComfyUI's http(s) address, not ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new TypeError(`url must be ComfyUI's http(s) address, not ${JSON.stringify(url)}`);
  return parsed.href.replace(/\/+$/, '');
}
