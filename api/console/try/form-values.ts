import { FILE_KEYWORD, fieldType, type FieldSchema } from './kind-info.js';

/**
 * The form's values as typed (strings of inputs, booleans of checkboxes), and the job input
 * they make: numbers parsed, JSON fields parsed and checked, empty fields left out.
 */

export type RawValue = string | boolean;
export type RawValues = Record<string, RawValue | undefined>;

/** Fields shown first; every other optional field is folded under "Advanced". */
const MAIN_FIELDS = ['prompt', 'text', 'model', 'messages'];

export function isMainField(name: string, schema: FieldSchema, required: string[]): boolean {
  return required.includes(name) || MAIN_FIELDS.includes(name) || schema[FILE_KEYWORD] !== undefined;
}

/** What control a field gets. */
export function controlOf(name: string, s: FieldSchema): 'file' | 'select' | 'checkbox' | 'number' | 'json' | 'textarea' | 'text' {
  if (s[FILE_KEYWORD]) return 'file';
  if (s.enum) return 'select';
  const t = fieldType(s);
  if (t === 'boolean') return 'checkbox';
  if (t === 'integer' || t === 'number') return 'number';
  if (t === 'array' || t === 'object') return 'json';
  if (['prompt', 'text', 'negative_prompt', 'system'].includes(name) || (s.maxLength ?? 0) > 1000) return 'textarea';
  return 'text';
}

/** The job input of the values, and what is wrong with each field that cannot be read. */
export function buildInput(properties: Record<string, FieldSchema>, values: RawValues): { input: Record<string, unknown>; errors: Record<string, string> } {
  const input: Record<string, unknown> = {};
  const errors: Record<string, string> = {};
  // In the schema's order, so the snippets read as the form does; prefilled extras last.
  const names = [...new Set([...Object.keys(properties), ...Object.keys(values)])];
  for (const name of names) {
    const raw = values[name];
    if (raw === undefined || raw === '') continue;
    const s = properties[name];
    // A prefilled field no schema names goes as it is: the gateway forwards extra fields.
    if (!s) {
      input[name] = raw;
      continue;
    }
    const control = controlOf(name, s);
    if (control === 'checkbox') {
      input[name] = raw === true || raw === 'true';
    } else if (control === 'number') {
      const n = Number(raw);
      if (!Number.isFinite(n)) errors[name] = 'Enter a number.';
      else if (fieldType(s) === 'integer' && !Number.isInteger(n)) errors[name] = 'Enter a whole number.';
      else input[name] = n;
    } else if (control === 'json') {
      try {
        const parsed = JSON.parse(String(raw)) as unknown;
        const want = fieldType(s);
        const got = Array.isArray(parsed) ? 'array' : parsed === null ? 'null' : typeof parsed;
        if (got !== want) errors[name] = `Enter a JSON ${want}, not ${got === 'object' ? 'an object' : got === 'array' ? 'an array' : got}.`;
        else input[name] = parsed;
      } catch {
        errors[name] = 'This is not valid JSON.';
      }
    } else if (control === 'select' && typeof s.enum?.[0] === 'number') {
      input[name] = Number(raw);
    } else {
      input[name] = raw;
    }
  }
  return { input, errors };
}

/**
 * The field a gateway error path points at: `/input/width` and `/input/messages/0/role` an input
 * field (`rest` is `/0/role`), `/class` and `/confidentiality` the job's own as `@class`.
 */
export function fieldOfPath(path: string): { field: string; rest: string } | null {
  const top = /^\/(confidentiality|class)$/.exec(path);
  if (top) return { field: `@${top[1]}`, rest: '' };
  const m = /^\/input\/([^/]+)(.*)$/.exec(path);
  if (!m) return null;
  return { field: m[1].replace(/~1/g, '/').replace(/~0/g, '~'), rest: m[2] };
}
