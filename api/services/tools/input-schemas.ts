import safeRegex from 'safe-regex2';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { ApiError } from '../../../models/errors.js';
import { fieldErrors } from '../../../models/validation.js';

/** Largest `inputSchema`, as compact JSON. */
export const MAX_INPUT_SCHEMA_BYTES = 64 * 1024;

/**
 * Tools' `inputSchema`s: checked at registration, compiled once per tool for argument checks.
 *
 * @remarks
 * Each schema gets its own ajv instance: an account's `$id` can then never collide with (or be
 * `$ref`erenced by) another account's schema, and nothing outlives the cache entry. Strict mode
 * refuses unknown keywords and formats; union types (`["string", "null"]`, common in LLM
 * function schemas) are allowed, and so are `required` names without a `properties` entry.
 * Nothing is fetched: a `$ref` to anything outside the schema does not compile.
 */
export class InputSchemas {
  private readonly cache = new Map<string, ValidateFunction>();

  constructor(private readonly maxCached = 1000) {}

  /** Refuses what cannot serve as a tool's input schema; throws 400 `invalid_schema`. */
  check(schema: Record<string, unknown>): void {
    if (Buffer.byteLength(JSON.stringify(schema)) > MAX_INPUT_SCHEMA_BYTES) {
      throw invalidSchema(`inputSchema is larger than ${MAX_INPUT_SCHEMA_BYTES / 1024} KiB`);
    }
    if (schema.type !== 'object') throw invalidSchema('inputSchema must describe an object: its "type" must be "object"');
    this.compile(schema);
  }

  /** The validator of a tool's schema (tools never change, so the id keys it). */
  validator(toolId: string, schema: Record<string, unknown>): ValidateFunction {
    let validate = this.cache.get(toolId);
    if (validate) {
      // Most recently used last, so the oldest entry is the one evicted.
      this.cache.delete(toolId);
    } else {
      validate = this.compile(schema);
      if (this.cache.size >= this.maxCached) this.cache.delete(this.cache.keys().next().value!);
    }
    this.cache.set(toolId, validate);
    return validate;
  }

  /** "path message" of the first few errors, for a tool result the LLM can act on. */
  static describe(errors: ErrorObject[] | null | undefined): string {
    return fieldErrors(errors)
      .slice(0, 5)
      .map((e) => `${e.path} ${e.message}`)
      .join('; ');
  }

  private compile(schema: Record<string, unknown>): ValidateFunction {
    const ajv = new Ajv2020({ strict: true, strictRequired: false, allowUnionTypes: true, allErrors: true, coerceTypes: false, useDefaults: false, code: { regExp: vettedRegExp } });
    (addFormats as unknown as (a: Ajv2020) => void)(ajv);
    // Against the meta-schema first: its errors name the failing places of the schema.
    if (!ajv.validateSchema(schema)) {
      const message = ajv.errorsText(ajv.errors, { dataVar: 'inputSchema' });
      throw invalidSchema(`inputSchema is not a valid JSON Schema: ${message}`, { ajv: message, errors: fieldErrors(ajv.errors, '/inputSchema') });
    }
    let validate: ValidateFunction;
    try {
      validate = ajv.compile(schema);
    } catch (err) {
      // Strict mode (unknown keywords, formats), unresolvable $refs, bad patterns.
      throw invalidSchema(`inputSchema does not compile: ${(err as Error).message}`, { ajv: (err as Error).message });
    }
    // An $async schema's validator answers a promise, which would pass every argument.
    if ((validate as { $async?: boolean }).$async) throw invalidSchema('inputSchema must not be asynchronous ($async)');
    return validate;
  }
}

/**
 * Patterns of an account's schema run on V8's backtracking engine when arguments are checked,
 * on the gateway's event loop: refuse the nested-quantifier shapes (star height > 1) that can
 * take exponential time, such as `(a+)+$`, when the schema is compiled (at registration).
 */
const vettedRegExp = Object.assign(
  (pattern: string, flags: string) => {
    if (!safeRegex(pattern)) throw new Error(`the pattern ${JSON.stringify(pattern)} nests quantifiers and could take exponential time; simplify it`);
    return new RegExp(pattern, flags);
  },
  { code: 'new RegExp' },
);

function invalidSchema(message: string, details: Record<string, unknown> = {}): ApiError {
  return new ApiError('invalid_schema', message, { details: { path: '/inputSchema', ...details } });
}
