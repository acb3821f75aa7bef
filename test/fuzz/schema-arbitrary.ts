import fc from 'fast-check';

/** A JSON Schema (2020-12, refs already resolved) as far as the fuzzer reads one. */
type Schema = Record<string, any> | boolean;

/**
 * How big valid-shaped values get. Small on purpose: the malformed variants (malformed-body.ts)
 * bring the huge values; here the point is a body the gateway gets past its validator with.
 */
const MAX_STRING = 24;
const MAX_ITEMS = 3;
const MAX_DEPTH = 5;

const FORMAT_VALUES: Record<string, string[]> = {
  uri: ['https://example.com/a.png', 'http://127.0.0.1:1/x', 'file:///etc/passwd', 'https://[::1]/', 'data:,x'],
  url: ['https://example.com/a.png', 'http://169.254.169.254/latest'],
  'date-time': ['2026-01-01T00:00:00Z', '1970-01-01T00:00:00.000Z', '9999-12-31T23:59:59Z'],
  date: ['2026-01-01'],
  email: ['a@example.com'],
  uuid: ['00000000-0000-4000-8000-000000000000'],
};

/** Any JSON value, shallow: what a wrong-typed or free-form field gets. */
export const anyJson = (): fc.Arbitrary<unknown> =>
  fc.oneof(fc.constant(null), fc.boolean(), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.string({ maxLength: MAX_STRING }), fc.constant([]), fc.constant({}));

function stringArb(s: Record<string, any>): fc.Arbitrary<string> {
  const minLength = Math.min(s.minLength ?? 0, 200);
  const maxLength = Math.max(minLength, Math.min(s.maxLength ?? MAX_STRING, MAX_STRING));
  if (typeof s.format === 'string' && FORMAT_VALUES[s.format]) return fc.constantFrom(...FORMAT_VALUES[s.format]);
  if (typeof s.pattern === 'string') {
    try {
      return fc.stringMatching(new RegExp(s.pattern)).filter((v) => v.length <= Math.max(maxLength, 64));
    } catch {
      // a pattern JavaScript's RegExp does not take: fall through to a plain string
    }
  }
  // Mostly ASCII, sometimes any code point (lone surrogates included: JSON.stringify escapes them).
  return fc.oneof({ arbitrary: fc.string({ minLength, maxLength }), weight: 3 }, fc.string({ minLength, maxLength, unit: 'binary' }));
}

function numberArb(s: Record<string, any>, integer: boolean): fc.Arbitrary<number> {
  const min = typeof s.minimum === 'number' ? s.minimum : typeof s.exclusiveMinimum === 'number' ? s.exclusiveMinimum + 1 : -1000;
  const max = typeof s.maximum === 'number' ? s.maximum : typeof s.exclusiveMaximum === 'number' ? s.exclusiveMaximum - 1 : 1_000_000;
  const lo = Math.max(min, Number.MIN_SAFE_INTEGER);
  const hi = Math.max(lo, Math.min(max, Number.MAX_SAFE_INTEGER));
  if (integer) {
    // fc.integer is 32-bit; wider ranges take their edges and a few values between.
    if (lo >= -(2 ** 31) && hi <= 2 ** 31 - 1) return fc.integer({ min: lo, max: hi });
    return fc.oneof(fc.constantFrom(lo, hi), fc.integer({ min: 0, max: 1000 }).map((n) => Math.min(hi, Math.max(lo, n))));
  }
  return fc.double({ min: lo, max: hi, noNaN: true });
}

function objectArb(s: Record<string, any>, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const props: Record<string, Schema> = s.properties ?? {};
  const required = new Set<string>(s.required ?? []);
  const record: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [name, sub] of Object.entries(props)) record[name] = schemaArbitrary(sub, depth + 1);
  const known = fc.record(record, { requiredKeys: Object.keys(props).filter((k) => required.has(k)) });
  // Required names that no property schema describes still have to be there.
  const missing = [...required].filter((k) => !(k in props));
  const extraSchema = s.additionalProperties;
  const extras =
    extraSchema && typeof extraSchema === 'object' && depth < MAX_DEPTH
      ? fc.dictionary(fc.string({ minLength: 1, maxLength: 12 }), schemaArbitrary(extraSchema, depth + 1), { maxKeys: 2 })
      : fc.constant({});
  return fc.tuple(known, extras, fc.tuple(...missing.map(() => anyJson()))).map(([k, e, m]) => ({ ...e, ...k, ...Object.fromEntries(missing.map((name, i) => [name, m[i]])) }));
}

/** Merges the object parts of an allOf, so each part's required fields are there. */
function mergeAllOf(parts: Schema[]): Record<string, any> {
  const merged: Record<string, any> = { type: 'object', properties: {}, required: [] };
  for (const part of parts) {
    if (typeof part !== 'object') continue;
    const p = part.allOf ? mergeAllOf(part.allOf) : part;
    if (p.type !== 'object' && !p.properties) return p; // a non-object part: take it as the schema
    Object.assign(merged.properties, p.properties ?? {});
    merged.required.push(...(p.required ?? []));
    if (p.additionalProperties !== undefined) merged.additionalProperties = p.additionalProperties;
  }
  return merged;
}

/**
 * A fast-check arbitrary of values shaped by `schema`: right types, enums, required fields,
 * bounds where the schema gives them. Not guaranteed valid (patterns, formats, cross-field
 * rules are approximated), which is fine: the server's answer to near-valid input is what the
 * fuzzer looks at.
 */
export function schemaArbitrary(schema: Schema, depth = 0): fc.Arbitrary<unknown> {
  if (schema === true || schema === undefined) return anyJson();
  if (schema === false) return fc.constant(null);
  const s = schema;
  if ('const' in s) return fc.constant(s.const);
  if (Array.isArray(s.enum)) return fc.constantFrom(...s.enum);
  if (Array.isArray(s.allOf)) {
    const { allOf, ...rest } = s;
    return schemaArbitrary({ ...mergeAllOf(allOf), ...rest, ...(rest.properties ? { properties: { ...mergeAllOf(allOf).properties, ...rest.properties } } : {}) }, depth);
  }
  const alternatives = s.oneOf ?? s.anyOf;
  if (Array.isArray(alternatives) && alternatives.length) return fc.oneof(...alternatives.map((a: Schema) => schemaArbitrary(a, depth)));
  if (depth > MAX_DEPTH) return fc.constant(null);
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'string':
      return stringArb(s);
    case 'integer':
      return numberArb(s, true);
    case 'number':
      return numberArb(s, false);
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const minLength = Math.min(s.minItems ?? 0, MAX_ITEMS);
      const maxLength = Math.max(minLength, Math.min(s.maxItems ?? MAX_ITEMS, MAX_ITEMS));
      return fc.array(schemaArbitrary(s.items ?? true, depth + 1), { minLength, maxLength });
    }
    case 'object':
      return objectArb(s, depth);
    default:
      return s.properties ? objectArb(s, depth) : anyJson();
  }
}
