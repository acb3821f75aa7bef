import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import type { ArtifactMeta, ByteRange, PresignedResponse } from '../../models/artifact-store.js';
import { ApiError } from '../../models/errors.js';
import type { Ctx } from './context.js';
import type { ResponseSpec } from './route-spec.js';

/**
 * Serving stored bytes (run artifacts, account files) with ETag, Last-Modified, one Range and
 * conditional requests, and reading an upload's body as it arrives.
 */

/** 416 `range_not_satisfiable`, with the `Content-Range` RFC 9110 asks for: the size the range missed. */
export class RangeNotSatisfiableError extends ApiError {
  constructor(size: number) {
    super('range_not_satisfiable', `the requested range is not satisfiable; the content has ${size} bytes`, {
      details: { size },
      headers: { 'Content-Range': `bytes */${size}` },
    });
  }
}

/** The 416 answer of every route that serves stored bytes through `sendStored`, for its OpenAPI responses. */
export const RANGE_NOT_SATISFIABLE: ResponseSpec = {
  description: 'Range not satisfiable: it starts past the end (error code range_not_satisfiable)',
  headers: { 'Content-Range': 'bytes */size: the size of the content' },
};

/**
 * The single range a `Range` header asks for; null to serve the whole body (no header, not
 * bytes, malformed, or several ranges), 'unsatisfiable' for a range wholly past the end.
 */
export function parseRange(header: string, size: number): ByteRange | null | 'unsatisfiable' {
  const m = /^bytes=(.*)$/i.exec(header.trim());
  if (!m) return null;
  const specs = m[1].split(',').map((s) => s.trim());
  if (specs.length !== 1) return null;
  const r = /^(\d{0,20})-(\d{0,20})$/.exec(specs[0]);
  if (!r || (r[1] === '' && r[2] === '')) return null;
  if (r[1] === '') {
    const suffix = Number(r[2]);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(r[1]);
  if (r[2] !== '' && Number(r[2]) < start) return null;
  if (start >= size) return 'unsatisfiable';
  return { start, end: r[2] === '' ? size - 1 : Math.min(Number(r[2]), size - 1) };
}

function etagMatches(header: string, etag: string): boolean {
  return header.split(',').some((t) => {
    const tag = t.trim();
    return tag === '*' || tag.replace(/^W\//, '') === etag;
  });
}

/** RFC 5987 / 6266 `filename*` value, and a plain-ASCII fallback for old clients. */
function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const encoded = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `inline; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

/**
 * The request body as it arrives. The store may stop reading early (too large): the request is
 * then left unread rather than destroyed, so that the 413 still reaches the worker. A body
 * cut short never reads as a complete one.
 */
export async function* requestBody(req: IncomingMessage): AsyncGenerator<Uint8Array> {
  for await (const chunk of req.iterator({ destroyOnReturn: false })) yield chunk as Uint8Array;
  if (!req.complete) throw new ApiError('invalid_request', 'the upload was interrupted');
}

/**
 * Answers a GET or HEAD with stored bytes, which `open` streams (from the service that owns
 * them). `public`: anyone holding the URL (artifacts; cached for a year, any origin may fetch);
 * `private`: behind a credential (account files; never cached). `redirect`, when it gives a
 * URL, answers a GET with 307 to it (the storage serves the bytes, Range included); HEAD and
 * conditional requests are still answered here, with the sha256 ETag.
 */
export async function sendStored(
  ctx: Ctx,
  meta: ArtifactMeta,
  access: 'public' | 'private',
  open: (range?: ByteRange) => Promise<Readable>,
  redirect?: (response: PresignedResponse) => Promise<string | null>,
): Promise<void> {
  const etag = `"${meta.sha256}"`;
  const lastModified = new Date(meta.created_at).toUTCString();
  const cacheControl = access === 'public' ? 'public, max-age=31536000, immutable' : 'private, no-store';
  const validators = () => {
    ctx.set('ETag', etag);
    ctx.set('Last-Modified', lastModified);
    ctx.set('Accept-Ranges', 'bytes');
    if (access === 'public') {
      ctx.set('Cache-Control', cacheControl);
      // Public by URL: any page may embed or fetch it (three.js loaders, <video>, canvas).
      ctx.set('Access-Control-Allow-Origin', '*');
      ctx.set('Access-Control-Expose-Headers', 'Content-Length, Content-Range, ETag, Accept-Ranges');
      ctx.set('Cross-Origin-Resource-Policy', 'cross-origin');
    } else {
      // Behind a credential: no shared cache may keep it.
      ctx.set('Cache-Control', cacheControl);
    }
  };

  const inm = ctx.get('If-None-Match');
  const ims = Date.parse(ctx.get('If-Modified-Since'));
  const notModified = inm !== '' ? etagMatches(inm, etag) : Number.isFinite(ims) && ims >= Math.floor(Date.parse(meta.created_at) / 1000) * 1000;
  if (notModified) {
    validators();
    ctx.status = 304;
    return;
  }

  const location = ctx.method === 'GET' && redirect ? await redirect({ contentType: meta.content_type, contentDisposition: contentDisposition(meta.name), cacheControl }) : null;
  if (location) {
    validators();
    // The URL expires (within the hour): no cache may keep the redirect longer than the request.
    ctx.set('Cache-Control', 'no-store');
    ctx.status = 307;
    ctx.set('Location', location);
    ctx.body = '';
    return;
  }

  const ifRange = ctx.get('If-Range').trim();
  const rangeHeader = ifRange === '' || ifRange === etag || ifRange === lastModified ? ctx.get('Range') : '';
  const range = rangeHeader ? parseRange(rangeHeader, meta.size) : null;
  if (range === 'unsatisfiable') throw new RangeNotSatisfiableError(meta.size);

  validators();
  // Worker-supplied bytes from our origin: never sniffed, never scripted.
  ctx.set('Content-Security-Policy', 'sandbox');
  ctx.set('Content-Disposition', contentDisposition(meta.name));
  ctx.set('Content-Type', meta.content_type);
  if (range) {
    ctx.status = 206;
    ctx.set('Content-Range', `bytes ${range.start}-${range.end}/${meta.size}`);
  }
  const length = range ? range.end - range.start + 1 : meta.size;
  ctx.body = ctx.method === 'HEAD' ? Buffer.alloc(0) : await open(range ?? undefined);
  ctx.set('Content-Length', String(length));
}
