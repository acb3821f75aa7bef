import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

type Doc = { components: { schemas: Record<string, unknown> } };
const PREFIX = '#/components/schemas/';

/** `schema` with each `#/components/schemas/...` reference of `doc` replaced by the schema it names. */
export function resolveRefs(schema: unknown, doc: Doc, path: string[] = []): unknown {
  if (Array.isArray(schema)) return schema.map((s) => resolveRefs(s, doc, path));
  if (schema === null || typeof schema !== 'object') return schema;
  const { $ref, ...siblings } = schema as Record<string, unknown>;
  const resolved = Object.fromEntries(Object.entries(siblings).map(([k, v]) => [k, k === 'discriminator' ? v : resolveRefs(v, doc, path)]));
  if (typeof $ref !== 'string') return resolved;
  if (!$ref.startsWith(PREFIX)) throw new Error(`unexpected $ref ${$ref}`);
  const name = $ref.slice(PREFIX.length);
  if (path.includes(name)) throw new Error(`circular $ref: ${[...path, name].join(' -> ')}`);
  if (!(name in doc.components.schemas)) throw new Error(`$ref to a missing component: ${name}`);
  // Siblings of a $ref (a `default`) apply together with it.
  const target = resolveRefs(doc.components.schemas[name], doc, [...path, name]);
  return Object.keys(resolved).length ? { allOf: [target], ...resolved } : target;
}

/** Every `$ref` in `value`. */
export function refsIn(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(refsIn);
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([k, v]) => (k === '$ref' && typeof v === 'string' ? [v] : refsIn(v)));
}

/** Checks values against schemas of `doc` (references resolved), with formats, as a client would. */
export function docValidator(doc: Doc): (schema: unknown, value: unknown) => string | null {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  (addFormats as unknown as (a: Ajv2020) => void)(ajv);
  return (schema, value) => {
    const validate = ajv.compile(resolveRefs(schema, doc) as object);
    return validate(value) ? null : ajv.errorsText(validate.errors);
  };
}
