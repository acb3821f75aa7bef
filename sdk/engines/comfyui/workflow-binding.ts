import { randomInt } from 'node:crypto';
import { PLACEHOLDER, type ApiGraph } from './workflow-templates.js';

/**
 * A template made into the prompt of one job: each placeholder in a node's inputs replaced by
 * the job's value (docs/engines.md "Placeholders").
 *
 * - A string that is one placeholder and nothing else takes the value with its JSON type:
 *   `"seed": "{{seed}}"` becomes `"seed": 42`, which ComfyUI's INT inputs need.
 * - A placeholder inside longer text is replaced by the value as text: `"{{prompt}}, 4k"`.
 * - `{{field|default}}` takes the default when the job has no such field (the default is read
 *   as JSON when it is JSON, else as text; `{{negative_prompt|}}` defaults to "").
 * - `{{seed}}` with no value and no default is a random seed, as ComfyUI's "randomize" would.
 * - `{{file:field}}` becomes the name ComfyUI's upload gave the job's file (`files`).
 */

/** A job that cannot fill its template: refused as the input's fault, not retried. */
export class BindError extends Error {
  override readonly name = 'BindError';
  readonly code = 'bad_input';
  readonly retryable = false;
}

/** ComfyUI's seed inputs take 64-bit values; the job schema's seed is 32-bit, and a random one stays within it. */
const randomSeed = () => randomInt(0, 2 ** 32);

export function bindWorkflow(graph: ApiGraph, input: Record<string, unknown>, files: Record<string, string>, file: string): ApiGraph {
  let seed: number | undefined;
  const valueOf = (isFile: boolean, field: string, fallback: string | undefined): unknown => {
    if (isFile) {
      const name = files[field];
      if (name === undefined) throw new BindError(`the template ${path(file)} needs the file of input field ${field} ({{file:${field}}})`);
      return name;
    }
    const value = input[field];
    if (value !== undefined && value !== null) {
      // An array is a link [node_id, slot] to ComfyUI, an object no widget value: neither may come from a job.
      if (typeof value === 'object') throw new BindError(`input field ${field} must be a string, number or boolean to fill {{${field}}}`);
      return value;
    }
    if (fallback !== undefined) {
      try {
        return JSON.parse(fallback);
      } catch {
        return fallback;
      }
    }
    if (field === 'seed') return (seed ??= randomSeed());
    throw new BindError(`input field ${field} is required by the template ${path(file)} ({{${field}}})`);
  };
  const bind = (value: unknown): unknown => {
    if (typeof value === 'string') {
      const whole = new RegExp(`^${PLACEHOLDER.source}$`).exec(value);
      if (whole) return valueOf(!!whole[1], whole[2], whole[3]);
      return value.replace(PLACEHOLDER, (_m, isFile: string | undefined, field: string, fallback: string | undefined) => String(valueOf(!!isFile, field, fallback)));
    }
    if (Array.isArray(value)) return value.map(bind);
    if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, bind(v)]));
    return value;
  };
  return Object.fromEntries(Object.entries(graph).map(([id, node]) => [id, { ...node, inputs: bind(node.inputs) as Record<string, unknown> }]));
}

const path = (file: string) => file.split(/[\\/]/).pop();
