import safeRegex from 'safe-regex2';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import { MAX_MODEL_SCHEMA_BYTES } from '../sdk/protocol/limits.js';
import { ApiError } from './errors.js';
import { FILE_KEYWORD, type FileFieldSpec, type KindSpec, fileFields } from './kinds.js';
import type { ModelRecord } from './types.js';
import { ajv, fieldErrors } from './validation.js';

/**
 * A model's input schema (docs/models.md, "Declaring models"): checked when a worker advertises
 * it or an operator declares it, then applied to the inputs of jobs that name the model.
 */

/** A schema a model may not have; `path` is a JSON pointer into the schema. */
export class ModelSchemaError extends ApiError {
  constructor(readonly path: string, message: string) {
    super('invalid_schema', `input_schema ${path}: ${message}`, { details: { path } });
    this.name = 'ModelSchemaError';
  }
}

type Schema = Record<string, unknown>;
const isObject = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);
/** A JSON pointer token (RFC 6901). */
const token = (name: string) => name.replaceAll('~', '~0').replaceAll('/', '~1');

// Where subschemas sit, so the walk below looks at schemas only and never at data such as an
// `enum` value or a property that happens to be named like a keyword.
const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];
const SCHEMA_ONE = ['items', 'additionalItems', 'additionalProperties', 'unevaluatedProperties', 'unevaluatedItems', 'contains', 'propertyNames', 'not', 'if', 'then', 'else'];
const SCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];

/** Calls `visit` on every schema object in `schema`, with its pointer. */
function walk(schema: unknown, path: string, visit: (s: Schema, path: string) => void): void {
  if (!isObject(schema)) return;
  visit(schema, path);
  for (const k of SCHEMA_MAPS) if (isObject(schema[k])) for (const [name, sub] of Object.entries(schema[k])) walk(sub, `${path}/${k}/${token(name)}`, visit);
  for (const k of SCHEMA_ONE) walk(schema[k], `${path}/${k}`, visit);
  for (const k of SCHEMA_LISTS) if (Array.isArray(schema[k])) (schema[k] as unknown[]).forEach((sub, i) => walk(sub, `${path}/${k}/${i}`, visit));
}

/** The first schema object of `schema` that `test` picks, as a pointer. */
function locate(schema: Schema, test: (s: Schema) => boolean): string | null {
  let found: string | null = null;
  walk(schema, '', (s, path) => {
    if (found === null && test(s)) found = path;
  });
  return found;
}

/**
 * The place of an ajv compile error: some messages name it (`at "#/properties/x"`, a URI
 * fragment); for an unknown keyword or an unresolvable `$ref`, the schema object that has it.
 */
function ajvPath(message: string, schema: Schema): string {
  const at = /at (?:path )?"#([^"]*)"/.exec(message)?.[1];
  if (at !== undefined) {
    try {
      return decodeURIComponent(at) || '/';
    } catch {
      return at || '/';
    }
  }
  const keyword = /unknown keyword: "([^"]+)"/.exec(message)?.[1];
  if (keyword !== undefined) return `${locate(schema, (s) => keyword in s) ?? ''}/${token(keyword)}`;
  const ref = /can't resolve reference (.+) from id/.exec(message)?.[1];
  if (ref !== undefined) return `${locate(schema, (s) => s.$ref === ref) ?? ''}/$ref`;
  return '/';
}

/**
 * Compiles with the gateway's one ajv (strict, and knowing x-switchyard-file), then drops the
 * schema from ajv's cache, which holds every compiled schema object for good: model schemas
 * arrive with every advertisement and would pile up.
 */
function compileModelSchema(schema: Schema): ValidateFunction {
  // Applied to inputs already valid against their kind, which is an object: saying so again
  // changes nothing, and ajv's strict types want it said before `properties`.
  const typed = schema.type === undefined ? { type: 'object', ...schema } : schema;
  let valid: boolean;
  try {
    valid = ajv.validateSchema(typed) as boolean;
  } catch (err) {
    // Another dialect's `$schema` (draft-07): ajv has no meta-schema for it.
    throw new ModelSchemaError('/$schema', `${(err as Error).message}: model schemas are JSON Schema 2020-12`);
  }
  if (!valid) {
    const first = fieldErrors(ajv.errors)[0];
    throw new ModelSchemaError(first.path, `is not valid JSON Schema: ${first.message}`);
  }
  try {
    return ajv.compile(typed);
  } catch (err) {
    const message = (err as Error).message;
    throw new ModelSchemaError(ajvPath(message, typed), `does not compile: ${message}`);
  } finally {
    ajv.removeSchema(typed);
  }
}

const TYPES_WITHIN: Record<string, string[]> = { number: ['number', 'integer'] };
const typesOf = (s: Schema): string[] | null => (typeof s.type === 'string' ? [s.type] : Array.isArray(s.type) ? (s.type as string[]) : null);

/** Checks the schema-wide rules: ids, regular expressions and file markers. */
function checkKeywords(schema: Schema, kindFiles: Record<string, FileFieldSpec>): void {
  walk(schema, '', (s, path) => {
    // An `$id` would enter the gateway's ajv for good (and could shadow the schemas it knows).
    if ('$id' in s) throw new ModelSchemaError(`${path}/$id`, 'a model schema may not declare $id: the model is its identity');
    if ('$async' in s) throw new ModelSchemaError(`${path}/$async`, 'a model schema may not be asynchronous');
    // Patterns run on the gateway's event loop for every job naming the model.
    const patterns: Array<[string, string]> = typeof s.pattern === 'string' ? [[s.pattern, `${path}/pattern`]] : [];
    if (isObject(s.patternProperties)) for (const p of Object.keys(s.patternProperties)) patterns.push([p, `${path}/patternProperties/${token(p)}`]);
    for (const [pattern, at] of patterns) {
      try {
        new RegExp(pattern, 'u');
      } catch (err) {
        throw new ModelSchemaError(at, `is not a regular expression: ${(err as Error).message}`);
      }
      if (!safeRegex(pattern)) throw new ModelSchemaError(at, `the pattern ${JSON.stringify(pattern)} nests quantifiers and could take exponential time; simplify it`);
    }
    if (!(FILE_KEYWORD in s)) return;
    const field = /^\/properties\/([^/]+)$/.exec(path)?.[1]?.replaceAll('~1', '/').replaceAll('~0', '~');
    if (field === undefined || !kindFiles[field]) {
      throw new ModelSchemaError(`${path}/${FILE_KEYWORD}`, `only the kind's file fields (${Object.keys(kindFiles).join(', ') || 'none'}) are files; a model cannot make another field one`);
    }
  });
}

/** Checks that each field the kind also names is narrowed, not redefined. */
function checkKindFields(schema: Schema, kind: KindSpec): void {
  const kindProps = (kind.inputSchema.properties ?? {}) as Record<string, Schema>;
  const files = fileFields(kind);
  const props = isObject(schema.properties) ? schema.properties : {};
  for (const [name, prop] of Object.entries(props)) {
    const kindProp = kindProps[name];
    if (!kindProp || !isObject(prop)) continue;
    const at = `/properties/${token(name)}`;
    const mine = typesOf(prop);
    const theirs = typesOf(kindProp);
    if (mine && theirs && !mine.every((t) => theirs.some((k) => k === t || TYPES_WITHIN[k]?.includes(t)))) {
      throw new ModelSchemaError(`${at}/type`, `"${name}" is ${theirs.join(' or ')} in ${kind.kind}; a model may narrow it, not make it ${mine.join(' or ')}`);
    }
    const file = files[name];
    if (!file) continue;
    const marker = prop[FILE_KEYWORD] as FileFieldSpec | undefined;
    if (!isObject(marker)) {
      throw new ModelSchemaError(at, `"${name}" is a file in ${kind.kind}: keep "${FILE_KEYWORD}" (with the content types it takes, among ${file.accept.join(', ')})`);
    }
    const accept = marker.accept;
    if (!Array.isArray(accept) || accept.length === 0 || !accept.every((t) => file.accept.includes(t))) {
      throw new ModelSchemaError(`${at}/${FILE_KEYWORD}/accept`, `"accept" must be a non-empty list among ${file.accept.join(', ')}`);
    }
  }
}

/**
 * Refuses a model input schema that is not a JSON Schema object of at most
 * MAX_MODEL_SCHEMA_BYTES, does not compile strictly, or does not extend `kind`'s schema: it may
 * add fields and narrow the kind's, not turn a kind's file field into another type or make a
 * new field a file. Throws `ModelSchemaError` (400 `invalid_schema`, the place in `details.path`).
 */
export function checkModelSchema(kind: KindSpec, schema: unknown): asserts schema is Schema {
  if (!isObject(schema)) throw new ModelSchemaError('/', 'a model input schema is a JSON object');
  const bytes = Buffer.byteLength(JSON.stringify(schema));
  if (bytes > MAX_MODEL_SCHEMA_BYTES) throw new ModelSchemaError('/', `is ${bytes} bytes as JSON; at most ${MAX_MODEL_SCHEMA_BYTES} are allowed`);
  if (schema.type !== undefined && schema.type !== 'object') throw new ModelSchemaError('/type', `must be "object" (or left out): a job's input is an object`);
  for (const k of ['additionalProperties', 'unevaluatedProperties']) {
    // The gateway refuses unknown fields itself, with a hint, and a closed schema would also
    // refuse the kind's fields it does not repeat (`model` among them).
    if (k in schema && schema[k] !== true) throw new ModelSchemaError(`/${k}`, `a model schema may not close the input: fields neither schema names are refused already`);
  }
  checkKeywords(schema, fileFields(kind));
  checkKindFields(schema, kind);
  compileModelSchema(schema);
}

/** Validators of model schemas by their JSON text (records are read afresh for each job), most recent last. */
const validators = new Map<string, ValidateFunction>();
const MAX_VALIDATORS = 1000;

function validatorOf(schema: Schema): ValidateFunction {
  const text = JSON.stringify(schema);
  let validate = validators.get(text);
  if (validate) validators.delete(text);
  else {
    validate = compileModelSchema(schema);
    if (validators.size >= MAX_VALIDATORS) validators.delete(validators.keys().next().value!);
  }
  validators.set(text, validate);
  return validate;
}

/** Optimal string alignment distance: Levenshtein's edits plus swapping two neighbours (`widht`). */
export function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** The known field nearest `name`, if it is near enough to be what was meant. */
export function nearest(name: string, known: Iterable<string>): string | null {
  let best: { field: string; distance: number } | null = null;
  for (const field of [...known].sort()) {
    const distance = editDistance(name.toLowerCase(), field.toLowerCase());
    if (!best || distance < best.distance) best = { field, distance };
  }
  // Two edits at most, and fewer for short names, so `x` does not suggest `n`.
  return best && best.distance <= Math.min(2, Math.ceil(name.length / 3)) ? best.field : null;
}

export interface InputProblem {
  path: string;
  message: string;
}

/**
 * Checks a job's input, already valid against its kind, against the model it names. With a
 * model schema, the input must satisfy it and name no field that neither the kind's nor the
 * model's properties name (errors, each with a "did you mean" hint when one is close). Without
 * one, such fields are accepted and listed as warnings.
 */
export function modelInputCheck(kind: KindSpec, model: ModelRecord | null, input: Record<string, unknown>): { errors: InputProblem[]; warnings: InputProblem[] } {
  const known = new Set(Object.keys((kind.inputSchema.properties ?? {}) as Schema));
  known.add('model');
  const schema = model?.input_schema ?? null;
  const errors: InputProblem[] = [];
  if (schema) {
    const validate = validatorOf(schema);
    if (!validate(input)) errors.push(...fieldErrors(validate.errors).map(({ path, message }) => ({ path, message })));
    for (const name of Object.keys(isObject(schema.properties) ? schema.properties : {})) known.add(name);
  }
  const unknown: InputProblem[] = [];
  for (const name of Object.keys(input)) {
    if (known.has(name)) continue;
    const hint = nearest(name, known);
    const owner = schema ? `model ${model!.id} of ${kind.kind}` : kind.kind;
    const consequence = schema ? '' : '; it is passed to the worker as it is';
    unknown.push({ path: `/${token(name)}`, message: `"${name}" is not a field of ${owner}${consequence}${hint ? ` (did you mean "${hint}"?)` : ''}` });
  }
  return schema ? { errors: [...errors, ...unknown], warnings: [] } : { errors: [], warnings: unknown };
}
