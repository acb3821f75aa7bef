import type { Middleware } from 'koa';
import { koaBody } from 'koa-body';
import { ApiError } from '../../../models/errors.js';
import type { RequestState } from '../context.js';

export interface JsonBodyOptions {
  /** Largest body accepted, in bytes (after Content-Encoding is undone). @defaultValue 1 MiB */
  limitBytes: number;
  /** Deepest nesting accepted. @defaultValue 64 */
  maxDepth: number;
}

const JSON_TYPES = ['application/json', 'application/*+json'];
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** Depth of a parsed JSON value, walked without recursion so a hostile body cannot blow the stack. */
export function jsonDepth(value: unknown, stopAt: number): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) max = depth;
    if (max > stopAt) return max;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
  return max;
}

/**
 * Parses a JSON body for routes that take one: 415 for other media types or charsets, 413
 * past the limit, 400 for bodies that are not UTF-8 JSON objects or are nested too deep.
 * An absent body reads as `{}`.
 *
 * koa-body reads the bytes (limits, Content-Encoding) as latin1, which maps each byte to one
 * character, so the bytes can be decoded here as strict UTF-8: co-body's own decoding would
 * silently replace invalid sequences, storing something the caller never sent.
 */
export function jsonBody(opts: JsonBodyOptions): Middleware<RequestState> {
  const read = koaBody({
    json: false,
    urlencoded: false,
    multipart: false,
    text: true,
    textTypes: JSON_TYPES,
    textLimit: opts.limitBytes,
    encoding: 'latin1',
    patchKoa: true,
    parsedMethods: ['POST', 'PUT', 'PATCH', 'DELETE'] as never,
    // Let the error handler render reader errors: koa-body's default would not use our envelope.
    onError: (err) => {
      throw err;
    },
  }) as unknown as Middleware<RequestState>;

  return async (ctx, next) => {
    const hasBody = ctx.request.length > 0 || ctx.get('Transfer-Encoding') !== '';
    let body: unknown = {};
    if (hasBody) {
      if (!ctx.is(JSON_TYPES)) {
        throw new ApiError('unsupported_media_type', `send the body as application/json (got ${ctx.get('Content-Type') || 'no Content-Type'})`);
      }
      const charset = ctx.request.charset.toLowerCase();
      if (charset && charset !== 'utf-8' && charset !== 'utf8') {
        throw new ApiError('unsupported_media_type', `send the body in UTF-8 (got charset=${charset})`);
      }
      try {
        await read(ctx, async () => {});
      } catch (err) {
        // http-errors (413, 415 for an unknown Content-Encoding) keep their meaning; anything else
        // (zlib failing on bytes that are not what Content-Encoding says) is the caller's bad body.
        if (typeof (err as { status?: number }).status === 'number') throw err;
        throw new ApiError('invalid_request', 'the request body could not be decoded as its Content-Encoding says');
      }
      body = parseJson(ctx.request.body as string);
    }
    if (jsonDepth(body, opts.maxDepth) > opts.maxDepth) {
      throw new ApiError('invalid_request', `the JSON body is nested deeper than ${opts.maxDepth} levels`);
    }
    ctx.state.body = body;
    await next();
  };
}

function refuseProto(key: string, value: unknown): unknown {
  if (key === '__proto__') throw new ApiError('invalid_request', 'JSON here may not contain a "__proto__" key');
  return value;
}

function parseJson(latin1: string): unknown {
  let text: string;
  try {
    text = utf8.decode(Buffer.from(latin1, 'latin1'));
  } catch {
    throw new ApiError('invalid_request', 'the request body is not valid UTF-8');
  }
  if (text.trim() === '') return {};
  return parseJsonObject(text);
}

/** Parses text that must be one JSON object, with no `__proto__` key (HTTP bodies, WebSocket messages). */
export function parseJsonObject(text: string, what = 'the request body'): Record<string, unknown> {
  let value: unknown;
  try {
    // A `__proto__` key is harmless in JSON.parse's output but a trap for any later merge;
    // refuse it. The reviver costs a walk, so it only runs when the text could spell one.
    value = text.includes('proto') || text.includes('\\u') ? JSON.parse(text, refuseProto) : JSON.parse(text);
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ApiError('invalid_request', `${what} is not valid JSON`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ApiError('invalid_request', `${what} must be a JSON object`);
  }
  return value as Record<string, unknown>;
}
