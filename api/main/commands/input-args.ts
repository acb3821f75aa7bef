import { readFileSync, statSync } from 'node:fs';

/**
 * The `--input` forms `switchyard run` and `switchyard verify` share: one JSON object (or
 * @FILE of one), and FIELD=@PATH / FIELD=TEXT over it.
 */

/** A --input the commands cannot use; they print it with their usage. */
export class InputArgError extends Error {}

/**
 * `FIELD=...`: a field name (letters, digits, `_`, not first a digit) then `=`. A JSON object
 * starts with `{` (or space) and an input file with `@`, so neither is ever read as a field.
 */
const FIELD_FORM = /^([A-Za-z_][A-Za-z0-9_]*)=([\s\S]*)$/;

/** Every --input, in order: at most one object (JSON or @FILE), then FIELD=... over it. */
export function parseInputArgs(values: string[]): { input: Record<string, unknown>; uploads: Map<string, string> } {
  let object: Record<string, unknown> | undefined;
  const fields: Array<[string, string]> = [];
  for (const value of values) {
    const field = FIELD_FORM.exec(value);
    if (field) fields.push([field[1], field[2]]);
    else if (object) throw new InputArgError('--input takes one JSON object (or @FILE); set more fields with --input FIELD=...');
    else object = parseInput(value);
  }
  const input: Record<string, unknown> = { ...object };
  const uploads = new Map<string, string>();
  for (const [name, value] of fields) {
    if (value.startsWith('@')) {
      const file = value.slice(1);
      let isFile = false;
      try {
        isFile = statSync(file).isFile();
      } catch (err) {
        throw new InputArgError(`--input ${name}=${value}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
      }
      if (!isFile) throw new InputArgError(`--input ${name}=${value}: not a file`);
      uploads.set(name, file);
    } else {
      uploads.delete(name);
    }
    input[name] = value;
  }
  return { input, uploads };
}

function parseInput(text: string): Record<string, unknown> {
  let source = text;
  if (text.startsWith('@')) {
    try {
      source = readFileSync(text.slice(1), 'utf8');
    } catch (err) {
      throw new InputArgError(`--input ${text}: ${(err as Error).message}`);
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(source);
  } catch (err) {
    throw new InputArgError(`--input is not valid JSON: ${(err as Error).message}`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new InputArgError('--input must be a JSON object, e.g. {"prompt":"a lighthouse"}');
  return value as Record<string, unknown>;
}
