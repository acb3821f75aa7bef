import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { ValidationError } from './errors.js';

/**
 * One ajv instance (JSON Schema 2020-12, the dialect of OpenAPI 3.1) compiles every request
 * schema; the OpenAPI document is generated from the very same schema objects.
 */
// verbose: errors carry their schema, so a pattern error can say what the field is for.
// strictRequired is off so `anyOf: [{required: [a]}, {required: [b]}]` ("a or b") stays legal.
export const ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false, coerceTypes: false, useDefaults: false, verbose: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
// Marks a kind's file fields (models/kinds.ts); the gateway stages them, ajv only lets it through.
ajv.addKeyword({ keyword: 'x-switchyard-file', schemaType: 'object' });
// Lists the files a kind produces in its output schema (models/kinds.ts): a description, not a check.
ajv.addKeyword({ keyword: 'x-switchyard-artifacts', schemaType: 'array' });

const cache = new WeakMap<object, ValidateFunction>();

export function compile(schema: object): ValidateFunction {
  let fn = cache.get(schema);
  if (!fn) {
    fn = ajv.compile(schema);
    cache.set(schema, fn);
  }
  return fn;
}

export interface FieldError {
  path: string;
  message: string;
  keyword: string;
  params: Record<string, unknown>;
}

/** ajv errors in the shape of the error envelope's `details.errors`, capped so a huge input cannot make a huge answer. */
export function fieldErrors(errors: ErrorObject[] | null | undefined, pathPrefix = ''): FieldError[] {
  return (errors ?? []).slice(0, 50).map((e) => {
    const missing = e.keyword === 'required' ? `/${(e.params as { missingProperty: string }).missingProperty}` : '';
    const extra = e.keyword === 'additionalProperties' ? `/${(e.params as { additionalProperty: string }).additionalProperty}` : '';
    // A pattern says nothing to a caller; the schema's description says what the field must be.
    const described = e.keyword === 'pattern' && typeof e.parentSchema?.description === 'string' ? `must be ${e.parentSchema.description}` : undefined;
    return { path: `${pathPrefix}${e.instancePath}${missing}${extra}` || '/', message: described ?? e.message ?? 'is invalid', keyword: e.keyword, params: e.params };
  });
}

/** Validates `value` against `schema`; throws 400 invalid_request naming every failing field. */
export function assertValid<T>(schema: object, value: unknown, what: string, pathPrefix = ''): T {
  const validate = compile(schema);
  if (!validate(value)) {
    const errors = fieldErrors(validate.errors, pathPrefix);
    const first = errors[0];
    throw new ValidationError(`${what} is invalid: ${first.path} ${first.message}`, errors);
  }
  return value as T;
}
