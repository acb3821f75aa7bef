import type { Middleware } from 'koa';
import { koaBody } from 'koa-body';
import { SwitchyardError } from '../../models/errors.js';
import type { RequestState } from '../context.js';

export interface JsonBodyOptions {
  /** Largest body accepted, in bytes. @defaultValue 1 MiB */
  limitBytes: number;
  /** Deepest nesting accepted. @defaultValue 64 */
  maxDepth: number;
}

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
 * Parses a JSON body for routes that take one: 415 for other media types, 413 past the limit,
 * 400 for broken or too deeply nested JSON. An empty body reads as `{}`.
 */
export function jsonBody(opts: JsonBodyOptions): Middleware<RequestState> {
  const parse = koaBody({
    json: true,
    jsonStrict: true,
    jsonLimit: opts.limitBytes,
    urlencoded: false,
    text: false,
    multipart: false,
    patchKoa: true,
    jsonTypes: ['application/json', 'application/*+json'],
    parsedMethods: ['POST', 'PUT', 'PATCH', 'DELETE'] as never,
    // Let the error handler render parser errors: koa-body's default handler would not use our envelope.
    onError: (err) => {
      throw err;
    },
  }) as unknown as Middleware<RequestState>;

  return async (ctx, next) => {
    const hasBody = ctx.request.length > 0 || ctx.get('Transfer-Encoding') !== '';
    if (hasBody) {
      if (!ctx.is('application/json', 'application/*+json')) {
        throw new SwitchyardError('unsupported_media_type', `send the body as application/json (got ${ctx.get('Content-Type') || 'no Content-Type'})`);
      }
      await parse(ctx, async () => {});
    }
    const body = hasBody ? ctx.request.body : {};
    if (jsonDepth(body, opts.maxDepth) > opts.maxDepth) {
      throw new SwitchyardError('invalid_request', `the JSON body is nested deeper than ${opts.maxDepth} levels`);
    }
    ctx.state.body = body ?? {};
    await next();
  };
}
