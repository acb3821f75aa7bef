import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

/**
 * The workflow templates of a --workflows folder: ComfyUI graphs in API format ("Export (API)"
 * in ComfyUI's menu), one per kind and optionally one per model of a kind (docs/engines.md):
 *
 *   image.generate.json              inference:image:generate, jobs naming no model
 *   image.generate@sdxl-base.json    inference:image:generate, jobs naming model sdxl-base
 *   3d.image-to-mesh.json            inference:3d:image-to-mesh
 *
 * The name is the kind without `inference:`, its colons as dots (a colon is no file name
 * character on Windows), then `@model`. Files of other names are not templates and are skipped.
 */

/** One node of an API-format graph: `inputs` holds widget values and links `[node_id, slot]`. */
export interface ApiNode {
  class_type: string;
  inputs: Record<string, unknown>;
  [other: string]: unknown;
}
export type ApiGraph = Record<string, ApiNode>;

export interface WorkflowTemplate {
  kind: string;
  /** The model it serves; null: the kind's default (jobs naming no model). */
  model: string | null;
  file: string;
  graph: ApiGraph;
  /** Input fields its `{{field}}` placeholders read. */
  fields: string[];
  /** Input fields its `{{file:field}}` placeholders read: uploaded to ComfyUI before the prompt. */
  fileFields: string[];
}

/** A folder or file that is not a usable set of templates; the message names the file and the fault. */
export class TemplateError extends Error {
  override readonly name = 'TemplateError';
}

/** `{{field}}`, `{{field|default}}`, `{{file:field}}`. */
export const PLACEHOLDER = /\{\{\s*(file:)?([A-Za-z_][A-Za-z0-9_]*)\s*(?:\|([^}]*))?\}\}/g;
const TEMPLATE_FILE = /^([a-z0-9][a-z0-9.-]*)(?:@([^@/\\]+))?\.json$/i;

/** The file name of the template of `kind` (and `model`). */
export function templateFileName(kind: string, model?: string): string {
  return `${kind.replace(/^inference:/, '').replaceAll(':', '.')}${model ? `@${model}` : ''}.json`;
}

/** Reads and checks every template of `dir`; throws a TemplateError on the first bad one. */
export function loadTemplates(dir: string): WorkflowTemplate[] {
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch (err) {
    throw new TemplateError(`cannot read the workflows folder ${dir}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const templates: WorkflowTemplate[] = [];
  for (const name of names) {
    const m = TEMPLATE_FILE.exec(name);
    if (!m) continue;
    const file = path.join(dir, name);
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new TemplateError(`${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    templates.push(parseTemplate(text, file, `inference:${m[1].replaceAll('.', ':')}`, m[2] ?? null));
  }
  if (templates.length === 0) throw new TemplateError(`${dir} has no workflow template: name them <kind>.json, e.g. ${templateFileName('inference:image:generate')}`);
  return templates;
}

/** One template from its text; `file` names it in errors. */
export function parseTemplate(text: string, file: string, kind: string, model: string | null): WorkflowTemplate {
  let graph: unknown;
  try {
    graph = JSON.parse(text);
  } catch (err) {
    throw new TemplateError(`${file} is not JSON: ${(err as Error).message}`);
  }
  if (!isObject(graph) || Object.keys(graph).length === 0) throw new TemplateError(`${file} is not a ComfyUI API-format graph: an object of nodes {"id": {"class_type", "inputs"}}`);
  // The UI format (Save, not Export (API)) has top-level nodes and links arrays ComfyUI's /prompt refuses.
  if (Array.isArray(graph.nodes) && Array.isArray(graph.links)) throw new TemplateError(`${file} is a ComfyUI UI workflow; export it with "Export (API)" instead`);
  const fields = new Set<string>();
  const fileFields = new Set<string>();
  for (const [id, node] of Object.entries(graph)) {
    if (!isObject(node) || typeof node.class_type !== 'string' || !isObject(node.inputs)) {
      throw new TemplateError(`${file}: node ${JSON.stringify(id)} is not {"class_type": "...", "inputs": {...}}`);
    }
    walkStrings(node.inputs, (s) => {
      for (const p of s.matchAll(PLACEHOLDER)) (p[1] ? fileFields : fields).add(p[2]);
    });
  }
  return { kind, model, file, graph: graph as ApiGraph, fields: [...fields], fileFields: [...fileFields] };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function walkStrings(value: unknown, visit: (s: string) => void): void {
  if (typeof value === 'string') visit(value);
  else if (Array.isArray(value)) value.forEach((v) => walkStrings(v, visit));
  else if (isObject(value)) Object.values(value).forEach((v) => walkStrings(v, visit));
}

/** The templates of a folder, looked up by kind and model. */
export class TemplateSet {
  constructor(readonly templates: WorkflowTemplate[]) {}

  kinds(): string[] {
    return [...new Set(this.templates.map((t) => t.kind))];
  }

  /** The models of `kind`'s per-model templates. */
  models(kind: string): string[] {
    return this.templates.filter((t) => t.kind === kind && t.model !== null).map((t) => t.model!);
  }

  /**
   * The template of a job: its model's, or with no model the kind's default, else (a kind with
   * per-model templates only) its first model's.
   */
  pick(kind: string, model: string | undefined): WorkflowTemplate | undefined {
    const ofKind = this.templates.filter((t) => t.kind === kind);
    if (model) return ofKind.find((t) => t.model === model);
    return ofKind.find((t) => t.model === null) ?? ofKind[0];
  }
}
