/**
 * A Cog model's `Input` schema (`GET /openapi.json`, components.schemas.Input; its shape is
 * replicate/cog pkg/schema/openapi_spec.go and architecture/02-schema.md) turned into the
 * input_schema the worker advertises for its model: JSON Schema 2020-12 that the gateway
 * compiles strictly (docs/models.md "The input schema").
 *
 * - `x-order` sets the order of the properties, then goes with the other `x-` keywords.
 * - Choices (`allOf: [{$ref: "#/components/schemas/<name>"}]`) and any other `$ref` are inlined.
 * - `nullable` (OpenAPI 3.0) is dropped: Cog rejects an explicit null all the same, and leaves
 *   such a field out of `required`, which is what "may be omitted" needs.
 * - `format` is dropped: `password` (cog.Secret) is unknown to the gateway's validator.
 * - A `Path`/`File` input (`format: uri`) that is one of the kind's file fields becomes that
 *   file field (the caller's file is staged by the gateway and sent to Cog as a data URI); any
 *   other one is left out, so callers cannot make the container fetch URLs of their choosing.
 * - Fields whose type contradicts the kind's field of that name are left out too.
 */

type Schema = Record<string, unknown>;
const isObject = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What the engine needs of the kind: its properties (types) and which of them are files. */
export interface KindFields {
  properties: Record<string, Schema>;
  /** Field -> the kind's schema of that file field (with its x-switchyard-file marker). */
  files: Record<string, Schema>;
}

export interface CogInput {
  /** The advertised input schema. */
  schema: Schema;
  /** The Cog inputs a job may set, in x-order: each is passed through from the job's input. */
  fields: string[];
  /** Of those, the kind's file fields, sent as data URIs. */
  fileFields: string[];
  /** Cog inputs left out, with why, for the worker to say at start. */
  dropped: Array<{ field: string; why: string }>;
}

const MAX_DEPTH = 32;

/** Replaces `$ref`s (local to the OpenAPI document) by what they point at, and cleans each schema. */
function clean(schema: unknown, doc: Schema, depth: number): unknown {
  if (Array.isArray(schema)) return schema.map((s) => clean(s, doc, depth));
  if (!isObject(schema)) return schema;
  if (depth > MAX_DEPTH) throw new Error('the Input schema nests $refs too deep (a cycle?)');
  let s: Schema = schema;
  if (typeof s.$ref === 'string') s = { ...resolve(s.$ref, doc), ...withoutKey(s, '$ref') };
  // Cog's choices: the property's only allOf is its enum; merge it in, so `default` and
  // `description` sit next to `enum` as validators and UIs expect.
  if (Array.isArray(s.allOf) && s.allOf.length === 1 && isObject(s.allOf[0])) {
    const target = clean(s.allOf[0], doc, depth + 1) as Schema;
    s = { ...withoutKey(target, 'title', 'description'), ...withoutKey(s, 'allOf') };
  }
  const out: Schema = {};
  for (const [k, v] of Object.entries(s)) {
    if (k.startsWith('x-') || k === 'nullable' || k === 'format' || k === '$ref') continue;
    // Data, not schemas: copied as they are.
    if (k === 'enum' || k === 'default' || k === 'const' || k === 'examples' || k === 'required') out[k] = v;
    else if (k === 'example') continue; // OpenAPI 3.0 only; 2020-12 has `examples`.
    else out[k] = clean(v, doc, depth + 1);
  }
  return out;
}

function resolve(ref: string, doc: Schema): Schema {
  if (!ref.startsWith('#/')) throw new Error(`the Input schema refers outside the document (${ref})`);
  let at: unknown = doc;
  for (const part of ref.slice(2).split('/')) at = isObject(at) ? at[part.replaceAll('~1', '/').replaceAll('~0', '~')] : undefined;
  if (!isObject(at)) throw new Error(`the Input schema's ${ref} points at nothing`);
  return at;
}

function withoutKey(s: Schema, ...keys: string[]): Schema {
  const out = { ...s };
  for (const k of keys) delete out[k];
  return out;
}

const typesOf = (s: Schema): string[] | null => (typeof s.type === 'string' ? [s.type] : Array.isArray(s.type) ? (s.type as string[]) : null);
const fits = (mine: string[], theirs: string[]) => mine.every((t) => theirs.includes(t) || (t === 'integer' && theirs.includes('number')));

/** The Input schema of an OpenAPI document of Cog, converted for `kind` (see the file's comment). */
export function cogInputSchema(openapi: unknown, kind: KindFields): CogInput {
  const input = isObject(openapi) && isObject(openapi.components) && isObject(openapi.components.schemas) ? openapi.components.schemas.Input : undefined;
  if (!isObject(input) || !isObject(input.properties)) throw new Error('its openapi.json has no components.schemas.Input with properties: is it a Cog server?');
  const order = (p: unknown) => (isObject(p) && typeof p['x-order'] === 'number' ? p['x-order'] : Number.MAX_SAFE_INTEGER);
  const names = Object.keys(input.properties).sort((a, b) => order((input.properties as Schema)[a]) - order((input.properties as Schema)[b]));
  const properties: Schema = {};
  const fields: string[] = [];
  const fileFields: string[] = [];
  const dropped: CogInput['dropped'] = [];
  for (const name of names) {
    const raw = (input.properties as Schema)[name];
    if (!isObject(raw)) continue;
    const isPath = raw.format === 'uri' || (isObject(raw.items) && raw.items.format === 'uri');
    const prop = clean(raw, openapi as Schema, 0) as Schema;
    if (name === 'model') {
      dropped.push({ field: name, why: "`model` names the model to the gateway; Cog's own input of that name cannot be set" });
      continue;
    }
    if (isPath) {
      if (!kind.files[name] || raw.format !== 'uri') {
        dropped.push({ field: name, why: `a file input that is not one of the kind's file fields (${Object.keys(kind.files).join(', ') || 'none'})` });
        continue;
      }
      const { default: _d, ...rest } = prop;
      properties[name] = { ...rest, ...kind.files[name] };
      fields.push(name);
      fileFields.push(name);
      continue;
    }
    if (kind.files[name]) {
      dropped.push({ field: name, why: `a file field of the kind, but not a Path input of the model` });
      continue;
    }
    const theirs = kind.properties[name] ? typesOf(kind.properties[name]) : null;
    const mine = typesOf(prop);
    if (theirs && mine && !fits(mine, theirs)) {
      dropped.push({ field: name, why: `${mine.join(' or ')} in the model, ${theirs.join(' or ')} in the kind` });
      continue;
    }
    properties[name] = prop;
    fields.push(name);
  }
  const required = Array.isArray(input.required) ? input.required.filter((r): r is string => typeof r === 'string' && fields.includes(r)) : [];
  const schema: Schema = { type: 'object', properties, ...(required.length ? { required } : {}) };
  if (typeof input.description === 'string') schema.description = input.description;
  return { schema, fields, fileFields, dropped };
}

/** A model id from the document's `info.title` (Cog's default title is "Cog"). */
export function modelIdOf(openapi: unknown): string {
  const title = isObject(openapi) && isObject(openapi.info) && typeof openapi.info.title === 'string' ? openapi.info.title : '';
  const id = title
    .toLowerCase()
    .replace(/[^a-z0-9._:/@+-]+/g, '-')
    .replace(/^[^a-z0-9]+|-+$/g, '')
    .slice(0, 200);
  return id || 'cog';
}
