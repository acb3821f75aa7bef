import type { JsonObject } from '../../../sdk/client/index.js';
import { controlOf } from '../try/form-values.js';
import { FILE_KEYWORD, inputSchema, type FieldSchema, type KindInfo } from '../try/kind-info.js';

/** Fields read as text first on the run page, in this order: what a person wrote. */
export const TEXT_FIELDS = ['prompt', 'text', 'negative_prompt', 'system'];

/** An input field as the run page shows it. */
export type InputValue = { kind: 'text'; text: string } | { kind: 'json'; text: string } | { kind: 'file-url'; url: string } | { kind: 'file-id'; id: string };

const FILE_ID = /^file_[0-9A-Za-z]+$/;

/** How to show `value` of field `name`: file fields (by the schema, or a file id) as files, objects and arrays as JSON. */
export function shownValue(value: unknown, schema: FieldSchema | undefined): InputValue {
  if (typeof value === 'string' && (schema?.[FILE_KEYWORD] || FILE_ID.test(value))) {
    if (/^https?:\/\//i.test(value)) return { kind: 'file-url', url: value };
    if (FILE_ID.test(value)) return { kind: 'file-id', id: value };
  }
  if (value !== null && typeof value === 'object') return { kind: 'json', text: JSON.stringify(value, null, 2) };
  return { kind: 'text', text: typeof value === 'string' ? value : JSON.stringify(value) };
}

/** The try form's address prefilled with a run's input and options, and the fields it cannot carry. */
export interface RunAgain {
  path: string;
  /** Fields the form would not give back as they were: an empty text (the form leaves it out), or a non-text value of a field the form does not have. */
  left: string[];
}

/**
 * `/kinds/<kind>?<field>=<value>&confidentiality=&class=`: the kind's form reads each field by its
 * schema (numbers parsed, JSON fields parsed, `true`/`false` for checkboxes), so the values are
 * written as the form reads them. A field the schema does not name is sent as the text it is, so
 * only text survives the trip; other values, and empty texts (an empty field is left out), are
 * listed in `left`.
 */
export function runAgainPath(kind: KindInfo, input: JsonObject, options: { confidentiality?: string; class?: string }): RunAgain {
  const model = typeof input.model === 'string' ? input.model : undefined;
  const { properties } = inputSchema(kind, model);
  const query = new URLSearchParams();
  const left: string[] = [];
  for (const [name, value] of Object.entries(input)) {
    const s = properties[name];
    if (value === undefined) continue;
    if (value === '') left.push(name);
    else if (typeof value === 'string') query.set(name, value);
    else if (!s || value === null) left.push(name);
    else if (controlOf(name, s) === 'json' || typeof value === 'object') query.set(name, JSON.stringify(value));
    else query.set(name, String(value));
  }
  // A kind whose input names these fields takes them as input: the job's options stay the defaults.
  for (const [name, value] of Object.entries(options)) if (value && !(name in properties)) query.set(name, value);
  const q = query.toString();
  return { path: `/kinds/${kind.kind}${q ? `?${q}` : ''}`, left };
}
