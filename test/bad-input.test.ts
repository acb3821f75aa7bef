import assert from 'node:assert/strict';
import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { Redis } from 'ioredis';
import { ERROR_STATUS } from '../models/errors.js';
import { ADMIN_TOKEN, REDIS_URL, TestGateway, cleanupPrefix, errorCode, uniquePrefix, type Res } from './helpers/harness.js';

/**
 * Issue 2: every malformed request gets a 4xx with the error envelope, writes nothing, and
 * leaves the server answering. Never a 5xx.
 */

const KIND = 'inference:image:generate';
const VALID_JOB = { kind: KIND, input: { prompt: 'a cat' } };
const VALID_JOB_TEXT = JSON.stringify(VALID_JOB);
const ADMIN = { authorization: `Bearer ${ADMIN_TOKEN}` };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const WELL_FORMED_RUN_ID = 'run_01ARZ3NDEKTSV4RRFFQ69G5FAV';
const WELL_FORMED_ACCOUNT_ID = 'acct_01ARZ3NDEKTSV4RRFFQ69G5FAV';

/** What every case can reach: the gateway and the accounts made in `before`. */
interface World {
  gw: TestGateway;
  /** The account the corpus runs against; nothing may be written to it. */
  acct: { id: string; key: string };
  /** A second key of `acct`, the target of a DELETE whose body is broken. */
  spareKeyId: string;
  /** Another account: the cases a server may legitimately accept run here. */
  other: { id: string; key: string };
  otherKeyId: string;
}

interface Case {
  /** `<METHOD> <path> with <input>`; the test title appends `-> <status> <code>`. */
  name: string;
  status: number;
  code: string;
  send(w: World): Promise<Res>;
  check?(res: Res, w: World): void;
}

// ---------------------------------------------------------------------------------------------
// Senders

/** A body sent as-is (string or bytes) with the given headers; the main account's key unless `auth` is given. */
function send(w: World, method: string, path: string, raw: string | Buffer | undefined, headers: Record<string, string> = {}, auth: 'acct' | 'none' | 'admin' = 'acct'): Promise<Res> {
  const h: Record<string, string> = { ...headers };
  if (auth === 'acct') h.authorization ??= `Bearer ${w.acct.key}`;
  if (auth === 'admin') h.authorization ??= ADMIN.authorization;
  return w.gw.request(method, path, { raw, headers: h });
}

const jsonCT = { 'content-type': 'application/json' };
const postJson = (w: World, path: string, raw: string | Buffer, auth: 'acct' | 'none' | 'admin' = 'acct', headers: Record<string, string> = {}) =>
  send(w, 'POST', path, raw, { ...jsonCT, ...headers }, auth);
const submitRaw = (w: World, raw: string | Buffer, headers: Record<string, string> = {}) => postJson(w, '/v1/jobs', raw, 'acct', headers);
const submitBody = (w: World, body: unknown, headers: Record<string, string> = {}) => submitRaw(w, JSON.stringify(body), headers);
const adminCreate = (w: World, body: unknown) => postJson(w, '/v1/admin/accounts', JSON.stringify(body), 'admin');
const adminCredits = (w: World, body: unknown, id = w.acct.id) => postJson(w, `/v1/admin/accounts/${id}/credits`, JSON.stringify(body), 'admin');
const getWithKey = (w: World, path: string, headers: Record<string, string> = {}) => send(w, 'GET', path, undefined, headers);

/** Parses one HTTP/1.1 response out of raw bytes, or null while it is incomplete. */
function parseRaw(buf: Buffer, final: boolean): (Res & { raw: string }) | null {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) {
    if (final) throw new Error(`not an HTTP response: ${JSON.stringify(buf.toString('latin1').slice(0, 300))}`);
    return null;
  }
  const head = buf.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(head[0]);
  if (!m) throw new Error(`not an HTTP status line: ${JSON.stringify(head[0])}`);
  const headers = new Headers();
  for (const line of head.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  let body = buf.subarray(end + 4);
  const length = headers.get('content-length');
  if (length !== null) {
    if (body.length < Number(length)) {
      if (final) throw new Error(`truncated response: ${body.length} of ${length} bytes`);
      return null;
    }
    body = body.subarray(0, Number(length));
  } else if (!final) {
    return null;
  }
  const text = body.toString('utf8');
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // callers look at `text`
  }
  return { status: Number(m[1]), headers, body: parsed, text, raw: buf.toString('latin1') };
}

/**
 * Writes `parts` to a fresh TCP connection and reads the first HTTP response. Write errors
 * (the server may answer and close before a big body is sent) are ignored once an answer came.
 */
function rawHttp(gw: TestGateway, ...parts: Array<string | Buffer>): Promise<Res & { raw: string }> {
  const { hostname, port } = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let done = false;
    const settle = (fn: () => void) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      fn();
    };
    const finish = (final: boolean) => {
      let res: (Res & { raw: string }) | null;
      try {
        res = parseRaw(Buffer.concat(chunks), final);
      } catch (err) {
        return settle(() => reject(err));
      }
      if (res) settle(() => resolve(res));
      else if (final) settle(() => reject(new Error('the connection closed without an answer')));
    };
    // A hang detector, not a timing assertion: the server must answer at all.
    const timer = setTimeout(
      () => settle(() => reject(new Error(`no answer (hang); received so far: ${JSON.stringify(Buffer.concat(chunks).toString('latin1').slice(0, 300))}`))),
      15_000,
    );
    socket.on('data', (d) => {
      chunks.push(d);
      finish(false);
    });
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('error', (err) => {
      if (chunks.length) finish(true);
      else settle(() => reject(err));
    });
    socket.on('connect', () => {
      for (const part of parts) if (!socket.destroyed) socket.write(part);
    });
  });
}

function hostOf(gw: TestGateway): string {
  return new URL(gw.url).host;
}

/** A raw request with a JSON body and a correct Content-Length, plus any extra header lines. */
function rawJsonRequest(w: World, method: string, path: string, body: string | Buffer, extraLines: string[] = [], withKey = true): Promise<Res & { raw: string }> {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  const head =
    `${method} ${path} HTTP/1.1\r\nHost: ${hostOf(w.gw)}\r\n${withKey ? `Authorization: Bearer ${w.acct.key}\r\n` : ''}` +
    `Content-Type: application/json\r\nContent-Length: ${bytes.length}\r\n${extraLines.map((l) => `${l}\r\n`).join('')}Connection: close\r\n\r\n`;
  return rawHttp(w.gw, Buffer.from(head, 'latin1'), bytes);
}

// ---------------------------------------------------------------------------------------------
// Assertions

/** No stack frame, source path or module path in an answer. */
function assertNoInternals(res: Res): void {
  const text = res.text;
  assert.doesNotMatch(text, /\n\s*at\s/, `stack frame in the body: ${text.slice(0, 500)}`);
  assert.doesNotMatch(text, /\bat\s+\S+\s+\(/, `stack frame in the body: ${text.slice(0, 500)}`);
  assert.doesNotMatch(text, /\bat\s+(file:\/\/|\/|node:)/, `stack frame in the body: ${text.slice(0, 500)}`);
  assert.ok(!text.includes('/work/'), `file path in the body: ${text.slice(0, 500)}`);
  assert.ok(!text.includes('.ts:'), `source location in the body: ${text.slice(0, 500)}`);
  assert.ok(!text.includes('node_modules'), `module path in the body: ${text.slice(0, 500)}`);
  assert.ok(!text.includes('node:internal'), `node internals in the body: ${text.slice(0, 500)}`);
}

/** The error envelope (docs/api.md) with `code` at `status`, a request id, and nothing internal. */
function assertError(res: Res, status: number, code: string): void {
  const seen = `${res.status} ${res.text.slice(0, 500)}`;
  assert.ok(res.status < 500, `a 5xx: ${seen}`);
  assert.equal(res.status, status, `unexpected status: ${seen}`);
  assert.equal(errorCode(res), code, `unexpected code: ${seen}`);
  const mapped = (ERROR_STATUS as Record<string, number>)[code];
  assert.equal(mapped, status, `code ${code} does not map to ${status}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/, `not JSON: ${seen}`);
  assert.equal(typeof res.body.error.message, 'string');
  assert.ok(res.body.error.message.length > 0, 'empty error message');
  assertNoInternals(res);
  assert.ok(res.headers.get('x-request-id'), `no X-Request-Id header: ${seen}`);
}

/** A fresh id was generated instead of echoing the caller's unsafe one. */
function assertFreshRequestId(res: Res, unsafe: string): void {
  const id = res.headers.get('x-request-id') ?? '';
  assert.notEqual(id, unsafe);
  assert.match(id, UUID, `X-Request-Id is not a fresh id: ${JSON.stringify(id)}`);
}

function assertUnauthorizedHeader(res: Res): void {
  assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer\b/, 'a 401 carries WWW-Authenticate: Bearer');
}

// ---------------------------------------------------------------------------------------------
// Bodies

function nested(depth: number, leaf = '1'): string {
  return '{"a":'.repeat(depth) + leaf + '}'.repeat(depth);
}

function nestedArray(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth);
}

/** A valid job whose input holds `n` extra keys (short base-36 names keep it under 1 MiB). */
function manyKeysJob(n: number): string {
  const parts: string[] = ['"prompt":"a cat"'];
  for (let i = 0; i < n; i++) parts.push(`"${i.toString(36)}":0`);
  return `{"kind":"${KIND}","input":{${parts.join(',')}}}`;
}

/** A valid job with raw bytes spliced into its prompt. */
function jobWithPromptBytes(bytes: number[]): Buffer {
  return Buffer.concat([Buffer.from(`{"kind":"${KIND}","input":{"prompt":"a cat `), Buffer.from(bytes), Buffer.from('"}}')]);
}

const TWO_MIB = 2 * 1024 * 1024;
// Past JSON_BODY_LIMIT (3 MiB by default) once inflated.
const bigJob = () => JSON.stringify({ kind: KIND, input: { prompt: 'a cat', padding: 'x'.repeat(2 * TWO_MIB) } });

// ---------------------------------------------------------------------------------------------
// The corpus

const jobsPost: Case[] = [
  // Broken JSON
  { name: 'POST /v1/jobs with truncated JSON', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, '{"kind":"inference:image:generate","input":{"prompt":"a c') },
  { name: 'POST /v1/jobs with trailing garbage after the JSON', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, `${VALID_JOB_TEXT} garbage`) },
  { name: 'POST /v1/jobs with two JSON documents', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, `${VALID_JOB_TEXT}${VALID_JOB_TEXT}`) },
  { name: 'POST /v1/jobs with single-quoted JSON', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, "{'kind':'inference:image:generate','input':{'prompt':'a cat'}}") },
  { name: 'POST /v1/jobs with NaN in the JSON', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, `{"kind":"${KIND}","input":{"prompt":"a cat","seed":NaN}}`) },
  { name: 'POST /v1/jobs with Infinity in the JSON', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, `{"kind":"${KIND}","input":{"prompt":"a cat","seed":Infinity}}`) },
  { name: 'POST /v1/jobs with a trailing comma', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, `{"kind":"${KIND}","input":{"prompt":"a cat"},}`) },
  { name: 'POST /v1/jobs with a comment in the JSON', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, `{"kind":"${KIND}", /* hi */ "input":{"prompt":"a cat"}}`) },
  { name: 'POST /v1/jobs with a lone opening brace', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, '{') },
  { name: 'POST /v1/jobs with whitespace only', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, '   \n\t ') },
  { name: 'POST /v1/jobs with a NUL byte in the JSON', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, `{"kind":"${KIND}",\u0000"input":{"prompt":"a cat"}}`) },
  // Top-level JSON that is not an object
  { name: 'POST /v1/jobs with a JSON array at top level', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, `[${VALID_JOB_TEXT}]`) },
  { name: 'POST /v1/jobs with a JSON string at top level', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, '"inference:image:generate"') },
  { name: 'POST /v1/jobs with a JSON number at top level', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, '42') },
  { name: 'POST /v1/jobs with JSON null at top level', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, 'null') },
  { name: 'POST /v1/jobs with JSON true at top level', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, 'true') },
  // Media types and encodings
  {
    name: 'POST /v1/jobs with a JSON body sent as text/plain',
    status: 415,
    code: 'unsupported_media_type',
    send: (w) => send(w, 'POST', '/v1/jobs', VALID_JOB_TEXT, { 'content-type': 'text/plain' }),
  },
  {
    name: 'POST /v1/jobs with a form-urlencoded body',
    status: 415,
    code: 'unsupported_media_type',
    send: (w) => send(w, 'POST', '/v1/jobs', `kind=${encodeURIComponent(KIND)}&input[prompt]=a+cat`, { 'content-type': 'application/x-www-form-urlencoded' }),
  },
  {
    name: 'POST /v1/jobs with a multipart/form-data body',
    status: 415,
    code: 'unsupported_media_type',
    send: (w) => {
      const boundary = 'xYzZY';
      const body = `--${boundary}\r\nContent-Disposition: form-data; name="kind"\r\n\r\n${KIND}\r\n--${boundary}\r\nContent-Disposition: form-data; name="input"\r\n\r\n{"prompt":"a cat"}\r\n--${boundary}--\r\n`;
      return send(w, 'POST', '/v1/jobs', body, { 'content-type': `multipart/form-data; boundary=${boundary}` });
    },
  },
  {
    name: 'POST /v1/jobs with a body but no Content-Type',
    status: 415,
    code: 'unsupported_media_type',
    send: (w) => send(w, 'POST', '/v1/jobs', Buffer.from(VALID_JOB_TEXT)),
    check: (res) => assert.equal(res.status, 415),
  },
  {
    name: 'POST /v1/jobs with an unparseable Content-Type',
    status: 415,
    code: 'unsupported_media_type',
    send: (w) => send(w, 'POST', '/v1/jobs', VALID_JOB_TEXT, { 'content-type': ';;;/' }),
  },
  {
    name: 'POST /v1/jobs with Content-Type application/json; charset=latin1',
    status: 415,
    code: 'unsupported_media_type',
    send: (w) => send(w, 'POST', '/v1/jobs', Buffer.from(`{"kind":"${KIND}","input":{"prompt":"caf\u00e9"}}`, 'latin1'), { 'content-type': 'application/json; charset=latin1' }),
  },
  {
    name: 'POST /v1/jobs with Content-Encoding gzip on a body that is not gzip',
    status: 400,
    code: 'invalid_request',
    send: (w) => send(w, 'POST', '/v1/jobs', VALID_JOB_TEXT, { ...jsonCT, 'content-encoding': 'gzip' }),
  },
  {
    name: 'POST /v1/jobs with Content-Encoding deflate on a body that is not deflate',
    status: 400,
    code: 'invalid_request',
    send: (w) => send(w, 'POST', '/v1/jobs', VALID_JOB_TEXT, { ...jsonCT, 'content-encoding': 'deflate' }),
  },
  {
    name: 'POST /v1/jobs with Content-Encoding br on a body that is not brotli',
    status: 400,
    code: 'invalid_request',
    send: (w) => send(w, 'POST', '/v1/jobs', VALID_JOB_TEXT, { ...jsonCT, 'content-encoding': 'br' }),
  },
  {
    name: 'POST /v1/jobs with an unknown Content-Encoding',
    status: 415,
    code: 'unsupported_media_type',
    send: (w) => send(w, 'POST', '/v1/jobs', VALID_JOB_TEXT, { ...jsonCT, 'content-encoding': 'x-unknown' }),
  },
  {
    name: 'POST /v1/jobs with a gzip body that inflates past the size limit',
    status: 413,
    code: 'payload_too_large',
    send: (w) => send(w, 'POST', '/v1/jobs', gzipSync(Buffer.from(bigJob())), { ...jsonCT, 'content-encoding': 'gzip' }),
  },
  {
    name: 'POST /v1/jobs with invalid UTF-8 bytes in the body',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitRaw(w, jobWithPromptBytes([0xff, 0xfe, 0xc3])),
  },
  {
    name: 'POST /v1/jobs with an encoded UTF-16 surrogate (CESU bytes) in the body',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitRaw(w, jobWithPromptBytes([0xed, 0xa0, 0x80])),
  },
  // Wrong types and shapes
  { name: 'POST /v1/jobs with kind as a number', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: 42, input: { prompt: 'a cat' } }) },
  { name: 'POST /v1/jobs with kind as an array', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: [KIND], input: { prompt: 'a cat' } }) },
  { name: 'POST /v1/jobs with kind missing', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { input: { prompt: 'a cat' } }) },
  { name: 'POST /v1/jobs with kind null', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: null, input: { prompt: 'a cat' } }) },
  { name: 'POST /v1/jobs with kind empty', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: '', input: { prompt: 'a cat' } }) },
  { name: 'POST /v1/jobs with kind of 10,000 characters', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: 'k'.repeat(10_000), input: { prompt: 'a cat' } }) },
  { name: 'POST /v1/jobs with an unknown kind', status: 400, code: 'unknown_kind', send: (w) => submitBody(w, { kind: 'inference:image:nope', input: { prompt: 'a cat' } }) },
  { name: 'POST /v1/jobs with kind "__proto__"', status: 400, code: 'unknown_kind', send: (w) => submitBody(w, { kind: '__proto__', input: { prompt: 'a cat' } }) },
  { name: 'POST /v1/jobs with kind "constructor"', status: 400, code: 'unknown_kind', send: (w) => submitBody(w, { kind: 'constructor', input: { prompt: 'a cat' } }) },
  { name: 'POST /v1/jobs with input as a string', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: KIND, input: 'a cat' }) },
  { name: 'POST /v1/jobs with input as an array', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: KIND, input: [{ prompt: 'a cat' }] }) },
  { name: 'POST /v1/jobs with input null', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: KIND, input: null }) },
  { name: 'POST /v1/jobs with input missing', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: KIND }) },
  { name: 'POST /v1/jobs with an empty object', status: 400, code: 'invalid_request', send: (w) => submitBody(w, {}) },
  { name: 'POST /v1/jobs with an unknown top-level field', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { ...VALID_JOB, priority: 1 }) },
  {
    name: 'POST /v1/jobs with a top-level "__proto__" field',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitRaw(w, `{"kind":"${KIND}","input":{"prompt":"a cat"},"__proto__":{"admin":true}}`),
  },
  { name: 'POST /v1/jobs with confidentiality "secret"', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { ...VALID_JOB, confidentiality: 'secret' }) },
  { name: 'POST /v1/jobs with confidentiality as a number', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { ...VALID_JOB, confidentiality: 2 }) },
  { name: 'POST /v1/jobs with class "urgent"', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { ...VALID_JOB, class: 'urgent' }) },
  { name: 'POST /v1/jobs with class null', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { ...VALID_JOB, class: null }) },
  { name: 'POST /v1/jobs with a webhook that is not https', status: 400, code: 'invalid_url', send: (w) => submitBody(w, { ...VALID_JOB, webhook: 'http://example.com/hook' }) },
  { name: 'POST /v1/jobs with a webhook that is not a URL', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { ...VALID_JOB, webhook: 'not a url' }) },
  { name: 'POST /v1/jobs with a javascript: webhook', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { ...VALID_JOB, webhook: 'javascript:alert(1)' }) },
  { name: 'POST /v1/jobs with a webhook as a number', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { ...VALID_JOB, webhook: 443 }) },
  {
    name: 'POST /v1/jobs with a webhook of 5,000 characters',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitBody(w, { ...VALID_JOB, webhook: `https://example.com/${'a'.repeat(5000)}` }),
  },
  { name: 'POST /v1/jobs with prompt as a number', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: KIND, input: { prompt: 42 } }) },
  { name: 'POST /v1/jobs with prompt as an object', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: KIND, input: { prompt: { text: 'a cat' } } }) },
  { name: 'POST /v1/jobs with prompt empty', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: KIND, input: { prompt: '' } }) },
  { name: 'POST /v1/jobs with prompt missing', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: KIND, input: { model: 'sdxl' } }) },
  { name: 'POST /v1/jobs with a prompt of 10,001 characters', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: KIND, input: { prompt: 'p'.repeat(10_001) } }) },
  { name: 'POST /v1/jobs with width as a float', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: KIND, input: { prompt: 'a cat', width: 512.5 } }) },
  { name: 'POST /v1/jobs with a negative seed', status: 400, code: 'invalid_request', send: (w) => submitBody(w, { kind: KIND, input: { prompt: 'a cat', seed: -1 } }) },
  { name: 'POST /v1/jobs with a seed of 1e400', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, `{"kind":"${KIND}","input":{"prompt":"a cat","seed":1e400}}`) },
  {
    name: 'POST /v1/jobs with a video job that has neither prompt nor image',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitBody(w, { kind: 'inference:video:generate', input: { fps: 24 } }),
  },
  {
    name: 'POST /v1/jobs with "__proto__" inside input',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitRaw(w, `{"kind":"${KIND}","input":{"prompt":"a cat","__proto__":{"polluted":true}}}`),
    check: () => assert.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype was polluted'),
  },
  {
    name: 'POST /v1/jobs with a \\u-escaped "__proto__" inside input',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitRaw(w, `{"kind":"${KIND}","input":{"prompt":"a cat","\\u005f\\u005fproto__":{"polluted":true}}}`),
    check: () => assert.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype was polluted'),
  },
  // File inputs: a file of /v1/files, an artifact URL, an https URL or a data: URI, refused naming the field, never a paid run
  ...[
    ['inference:3d:image-to-mesh', 'image'],
    ['inference:video:generate', 'image'],
    ['inference:texture:generate', 'mesh'],
    ['inference:rig', 'mesh'],
    ['inference:audio:transcribe', 'audio'],
    ['inference:audio:text-to-speech', 'reference_audio'],
  ].flatMap(([kind, field]) =>
    ['file:///etc/passwd', 'not a url', 'http://example.com/cat.png', 'ftp://example.com/cat.png', 'https://', '/etc/passwd'].map(
      (value): Case => ({
        name: `POST /v1/jobs ${kind} with ${field} ${JSON.stringify(value)}`,
        status: 400,
        code: 'invalid_request',
        send: (w) => submitBody(w, { kind, input: { prompt: 'a cat', text: 'hello', [field]: value } }),
        check: (res) => assert.match(String(res.body.error.message), new RegExp(`/input/${field} must be a file id \\(file_\\.\\.\\.\\) or URL from /v1/files`)),
      }),
    ),
  ),
  // Size and depth
  { name: 'POST /v1/jobs with a 2 MiB body', status: 413, code: 'payload_too_large', send: (w) => submitRaw(w, bigJob()) },
  {
    name: 'POST /v1/jobs with a 2 MiB body sent chunked (no Content-Length)',
    status: 413,
    code: 'payload_too_large',
    send: (w) => {
      const body = Buffer.from(bigJob());
      const head = `POST /v1/jobs HTTP/1.1\r\nHost: ${hostOf(w.gw)}\r\nAuthorization: Bearer ${w.acct.key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`;
      const chunks: Buffer[] = [Buffer.from(head)];
      for (let i = 0; i < body.length; i += 64 * 1024) {
        const part = body.subarray(i, i + 64 * 1024);
        chunks.push(Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n'));
      }
      chunks.push(Buffer.from('0\r\n\r\n'));
      return rawHttp(w.gw, ...chunks);
    },
  },
  {
    name: 'POST /v1/jobs with input nested 10,000 levels deep',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitRaw(w, `{"kind":"${KIND}","input":{"prompt":"a cat","deep":${nested(10_000)}}}`),
  },
  { name: 'POST /v1/jobs with arrays nested 10,000 levels deep at top level', status: 400, code: 'invalid_request', send: (w) => submitRaw(w, nestedArray(10_000)) },
  {
    name: 'POST /v1/jobs with input nested 100,000 levels deep',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitRaw(w, `{"kind":"${KIND}","input":{"prompt":"a cat","deep":${nested(100_000)}}}`),
  },
  { name: 'POST /v1/jobs with an empty body', status: 400, code: 'invalid_request', send: (w) => send(w, 'POST', '/v1/jobs', undefined, jsonCT) },
  // Credentials
  { name: 'POST /v1/jobs with no credential', status: 401, code: 'unauthorized', send: (w) => postJson(w, '/v1/jobs', VALID_JOB_TEXT, 'none'), check: assertUnauthorizedHeader },
  {
    name: 'POST /v1/jobs with an Authorization header using the Basic scheme',
    status: 401,
    code: 'unauthorized',
    send: (w) => postJson(w, '/v1/jobs', VALID_JOB_TEXT, 'none', { authorization: `Basic ${Buffer.from(`user:${w.acct.key}`).toString('base64')}` }),
    check: assertUnauthorizedHeader,
  },
  {
    name: 'POST /v1/jobs with an Authorization header using the Token scheme',
    status: 401,
    code: 'unauthorized',
    send: (w) => postJson(w, '/v1/jobs', VALID_JOB_TEXT, 'none', { authorization: `Token ${w.acct.key}` }),
    check: assertUnauthorizedHeader,
  },
  { name: 'POST /v1/jobs with "Bearer" and no key', status: 401, code: 'unauthorized', send: (w) => postJson(w, '/v1/jobs', VALID_JOB_TEXT, 'none', { authorization: 'Bearer' }) },
  {
    name: 'POST /v1/jobs with a Bearer value of two tokens',
    status: 401,
    code: 'unauthorized',
    send: (w) => postJson(w, '/v1/jobs', VALID_JOB_TEXT, 'none', { authorization: `Bearer ${w.acct.key} ${w.acct.key}` }),
  },
  { name: 'POST /v1/jobs with a garbage X-Service-Key', status: 401, code: 'unauthorized', send: (w) => postJson(w, '/v1/jobs', VALID_JOB_TEXT, 'none', { 'x-service-key': '../../etc/passwd' }) },
  {
    name: 'POST /v1/jobs with two X-Service-Key headers',
    status: 401,
    code: 'unauthorized',
    send: (w) => rawJsonRequest(w, 'POST', '/v1/jobs', VALID_JOB_TEXT, [`X-Service-Key: ${w.acct.key}`, `X-Service-Key: ${w.other.key}`], false),
    check: assertUnauthorizedHeader,
  },
  {
    name: 'POST /v1/jobs with a broken body and no credential (auth is checked first)',
    status: 401,
    code: 'unauthorized',
    send: (w) => postJson(w, '/v1/jobs', '{"kind":', 'none'),
  },
  // Odd headers
  {
    name: 'POST /v1/jobs with an X-Request-Id holding unsafe characters',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitRaw(w, '{', { 'x-request-id': '<script>alert(1)</script>; id="x"' }),
    check: (res) => assertFreshRequestId(res, '<script>alert(1)</script>; id="x"'),
  },
  {
    name: 'POST /v1/jobs with an X-Request-Id holding an encoded CRLF',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitRaw(w, '{', { 'x-request-id': 'abc%0d%0aSet-Cookie:%20pwned=1' }),
    check: (res) => {
      assertFreshRequestId(res, 'abc%0d%0aSet-Cookie:%20pwned=1');
      assert.equal(res.headers.get('set-cookie'), null);
    },
  },
  {
    name: 'POST /v1/jobs with an X-Request-Id of 300 characters',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitRaw(w, '{', { 'x-request-id': 'r'.repeat(300) }),
    check: (res) => assertFreshRequestId(res, 'r'.repeat(300)),
  },
  {
    name: 'POST /v1/jobs with a non-ASCII X-Request-Id (raw bytes)',
    status: 400,
    code: 'invalid_request',
    send: (w) => rawJsonRequest(w, 'POST', '/v1/jobs', '{', ['X-Request-Id: caf\u00c3\u00a9-\u00ff']),
    check: (res) => assertFreshRequestId(res, 'caf\u00c3\u00a9-\u00ff'),
  },
  {
    name: 'POST /v1/jobs with an X-Request-Id holding a raw CR (header injection attempt)',
    status: 400,
    code: 'invalid_request',
    send: (w) => rawJsonRequest(w, 'POST', '/v1/jobs', '{', ['X-Request-Id: abc\rSet-Cookie: pwned=1']),
    check: (res) => {
      assert.equal(res.headers.get('set-cookie'), null);
      assert.ok(!(res as Res & { raw: string }).raw.includes('pwned'), 'the injected header was echoed');
    },
  },
  {
    name: 'POST /v1/jobs with an X-Request-Id folded over two lines (obs-fold)',
    status: 400,
    code: 'invalid_request',
    send: (w) => rawJsonRequest(w, 'POST', '/v1/jobs', '{', ['X-Request-Id: abc', ' Set-Cookie: pwned=1']),
    check: (res) => {
      assert.equal(res.headers.get('set-cookie'), null);
      assert.ok(!(res as Res & { raw: string }).raw.includes('pwned'), 'the folded header was echoed');
    },
  },
  {
    name: 'POST /v1/jobs with an Idempotency-Key of 300 characters',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitBody(w, VALID_JOB, { 'idempotency-key': 'i'.repeat(300) }),
  },
  {
    name: 'POST /v1/jobs with an Idempotency-Key holding a tab',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitBody(w, VALID_JOB, { 'idempotency-key': 'abc\tdef' }),
  },
  {
    name: 'POST /v1/jobs with an Idempotency-Key holding control characters (raw bytes)',
    status: 400,
    code: 'invalid_request',
    send: (w) => rawJsonRequest(w, 'POST', '/v1/jobs', VALID_JOB_TEXT, ['Idempotency-Key: abc\u0001\u0007def']),
  },
  {
    name: 'POST /v1/jobs with a non-ASCII Idempotency-Key (raw bytes)',
    status: 400,
    code: 'invalid_request',
    send: (w) => rawJsonRequest(w, 'POST', '/v1/jobs', VALID_JOB_TEXT, ['Idempotency-Key: cl\u00c3\u00a9-\u00ff']),
  },
  {
    name: 'POST /v1/jobs with Accept: text/html and broken JSON (still a JSON envelope)',
    status: 400,
    code: 'invalid_request',
    send: (w) => submitRaw(w, '{"kind"', { accept: 'text/html' }),
  },
];

const jobsList: Case[] = [
  { name: 'GET /v1/jobs?status=bogus', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?status=bogus') },
  { name: 'GET /v1/jobs?status= (empty)', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?status=') },
  { name: 'GET /v1/jobs?status=queued&status=running (repeated)', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?status=queued&status=running') },
  { name: 'GET /v1/jobs?limit=0', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?limit=0') },
  { name: 'GET /v1/jobs?limit=101', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?limit=101') },
  { name: 'GET /v1/jobs?limit=abc', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?limit=abc') },
  { name: 'GET /v1/jobs?limit=-1', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?limit=-1') },
  { name: 'GET /v1/jobs?limit=1e2', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?limit=1e2') },
  { name: 'GET /v1/jobs?limit=99999999999999999999', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?limit=99999999999999999999') },
  { name: 'GET /v1/jobs?limit=1&limit=2 (repeated)', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?limit=1&limit=2') },
  { name: 'GET /v1/jobs?cursor=garbage', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?cursor=garbage!!') },
  {
    name: 'GET /v1/jobs?cursor=<base64 of a non-run id>',
    status: 400,
    code: 'invalid_request',
    send: (w) => getWithKey(w, `/v1/jobs?cursor=${Buffer.from('run_../../etc/passwd').toString('base64url')}`),
  },
  { name: 'GET /v1/jobs?cursor=<300 characters>', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, `/v1/jobs?cursor=${'A'.repeat(300)}`) },
  { name: 'GET /v1/jobs?kind=<200 characters>', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, `/v1/jobs?kind=${'k'.repeat(200)}`) },
  { name: 'GET /v1/jobs?foo=bar (unknown query parameter)', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?foo=bar') },
  { name: 'GET /v1/jobs?__proto__=x', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?__proto__=x') },
  { name: 'GET /v1/jobs?limit[]=1', status: 400, code: 'invalid_request', send: (w) => getWithKey(w, '/v1/jobs?limit[]=1') },
  { name: 'GET /v1/jobs with no credential', status: 401, code: 'unauthorized', send: (w) => send(w, 'GET', '/v1/jobs', undefined, {}, 'none'), check: assertUnauthorizedHeader },
];

const LONG_ID = `run_${'A'.repeat(8000)}`;

const jobsById: Case[] = [
  { name: 'GET /v1/jobs/run_123 (malformed id)', status: 404, code: 'not_found', send: (w) => getWithKey(w, '/v1/jobs/run_123') },
  { name: 'GET /v1/jobs/<lowercase ULID>', status: 404, code: 'not_found', send: (w) => getWithKey(w, `/v1/jobs/${WELL_FORMED_RUN_ID.toLowerCase()}`) },
  { name: 'GET /v1/jobs/<well-formed unknown run id>', status: 404, code: 'not_found', send: (w) => getWithKey(w, `/v1/jobs/${WELL_FORMED_RUN_ID}`) },
  { name: 'GET /v1/jobs/..%2F..%2Fetc%2Fpasswd', status: 404, code: 'not_found', send: (w) => getWithKey(w, '/v1/jobs/..%2F..%2Fetc%2Fpasswd') },
  { name: 'GET /v1/jobs/..%5C..%5Caccount (backslashes)', status: 404, code: 'not_found', send: (w) => getWithKey(w, '/v1/jobs/..%5C..%5Caccount') },
  { name: 'GET /v1/jobs/%00', status: 404, code: 'not_found', send: (w) => getWithKey(w, '/v1/jobs/%00') },
  { name: 'GET /v1/jobs/run_%0D%0ASet-Cookie (encoded CRLF)', status: 404, code: 'not_found', send: (w) => getWithKey(w, '/v1/jobs/run_%0D%0ASet-Cookie:%20x=1') },
  { name: 'GET /v1/jobs/<8,000-character id>', status: 404, code: 'not_found', send: (w) => getWithKey(w, `/v1/jobs/${LONG_ID}`) },
  { name: 'GET /v1/jobs/%E0%A4%A (broken percent-encoding)', status: 404, code: 'not_found', send: (w) => getWithKey(w, '/v1/jobs/%E0%A4%A') },
  { name: 'GET /v1/jobs/<emoji>', status: 404, code: 'not_found', send: (w) => getWithKey(w, '/v1/jobs/%F0%9F%92%A9') },
  { name: 'GET /v1/jobs/<id>/../../account (traversal, raw path)', status: 404, code: 'not_found', send: (w) => rawGet(w, `/v1/jobs/${WELL_FORMED_RUN_ID}/../../account`) },
  { name: 'POST /v1/jobs/run_123/cancel (malformed id)', status: 404, code: 'not_found', send: (w) => send(w, 'POST', '/v1/jobs/run_123/cancel', undefined) },
  { name: 'POST /v1/jobs/<well-formed unknown run id>/cancel', status: 404, code: 'not_found', send: (w) => send(w, 'POST', `/v1/jobs/${WELL_FORMED_RUN_ID}/cancel`, undefined) },
  { name: 'POST /v1/jobs/<8,000-character id>/cancel', status: 404, code: 'not_found', send: (w) => send(w, 'POST', `/v1/jobs/${LONG_ID}/cancel`, undefined) },
  { name: 'POST /v1/jobs/..%2F..%2Faccount/cancel', status: 404, code: 'not_found', send: (w) => send(w, 'POST', '/v1/jobs/..%2F..%2Faccount/cancel', undefined) },
  {
    name: 'POST /v1/jobs/<id>/cancel with a text/plain body',
    status: 415,
    code: 'unsupported_media_type',
    send: (w) => send(w, 'POST', `/v1/jobs/${WELL_FORMED_RUN_ID}/cancel`, 'please', { 'content-type': 'text/plain' }),
  },
  {
    name: 'POST /v1/jobs/<id>/cancel with broken JSON',
    status: 400,
    code: 'invalid_request',
    send: (w) => postJson(w, `/v1/jobs/${WELL_FORMED_RUN_ID}/cancel`, '{"reason":'),
  },
  { name: 'POST /v1/jobs/<id>/cancel with no credential', status: 401, code: 'unauthorized', send: (w) => send(w, 'POST', `/v1/jobs/${WELL_FORMED_RUN_ID}/cancel`, undefined, {}, 'none') },
  { name: 'GET /v1/jobs/<id>/cancel (wrong method)', status: 405, code: 'method_not_allowed', send: (w) => getWithKey(w, `/v1/jobs/${WELL_FORMED_RUN_ID}/cancel`) },
  { name: 'PUT /v1/jobs (wrong method)', status: 405, code: 'method_not_allowed', send: (w) => send(w, 'PUT', '/v1/jobs', VALID_JOB_TEXT, jsonCT) },
  { name: 'DELETE /v1/jobs/<id> (wrong method)', status: 405, code: 'method_not_allowed', send: (w) => send(w, 'DELETE', `/v1/jobs/${WELL_FORMED_RUN_ID}`, undefined) },
  { name: 'GET /v1/nope (unknown route)', status: 404, code: 'not_found', send: (w) => getWithKey(w, '/v1/nope') },
];

function rawGet(w: World, path: string): Promise<Res & { raw: string }> {
  return rawHttp(w.gw, `GET ${path} HTTP/1.1\r\nHost: ${hostOf(w.gw)}\r\nAuthorization: Bearer ${w.acct.key}\r\nConnection: close\r\n\r\n`);
}

const keys: Case[] = [
  { name: 'POST /v1/account/keys with name as a number', status: 400, code: 'invalid_request', send: (w) => postJson(w, '/v1/account/keys', '{"name":42}') },
  { name: 'POST /v1/account/keys with name empty', status: 400, code: 'invalid_request', send: (w) => postJson(w, '/v1/account/keys', '{"name":""}') },
  { name: 'POST /v1/account/keys with name null', status: 400, code: 'invalid_request', send: (w) => postJson(w, '/v1/account/keys', '{"name":null}') },
  { name: 'POST /v1/account/keys with a name of 101 characters', status: 400, code: 'invalid_request', send: (w) => postJson(w, '/v1/account/keys', JSON.stringify({ name: 'n'.repeat(101) })) },
  { name: 'POST /v1/account/keys with an unknown field', status: 400, code: 'invalid_request', send: (w) => postJson(w, '/v1/account/keys', '{"name":"ci","scopes":["admin"]}') },
  { name: 'POST /v1/account/keys with a JSON array', status: 400, code: 'invalid_request', send: (w) => postJson(w, '/v1/account/keys', '[{"name":"ci"}]') },
  { name: 'POST /v1/account/keys with truncated JSON', status: 400, code: 'invalid_request', send: (w) => postJson(w, '/v1/account/keys', '{"name":"c') },
  { name: 'POST /v1/account/keys with a body nested 10,000 levels deep', status: 400, code: 'invalid_request', send: (w) => postJson(w, '/v1/account/keys', nested(10_000)) },
  { name: 'POST /v1/account/keys with a text/plain body', status: 415, code: 'unsupported_media_type', send: (w) => send(w, 'POST', '/v1/account/keys', '{"name":"ci"}', { 'content-type': 'text/plain' }) },
  { name: 'POST /v1/account/keys with no credential', status: 401, code: 'unauthorized', send: (w) => postJson(w, '/v1/account/keys', '{"name":"ci"}', 'none') },
  { name: 'DELETE /v1/account/keys/key_doesnotexist', status: 404, code: 'not_found', send: (w) => send(w, 'DELETE', '/v1/account/keys/key_doesnotexist', undefined) },
  { name: 'DELETE /v1/account/keys/key_ (empty lookup id)', status: 404, code: 'not_found', send: (w) => send(w, 'DELETE', '/v1/account/keys/key_', undefined) },
  { name: 'DELETE /v1/account/keys/..%2F..%2Fadmin', status: 404, code: 'not_found', send: (w) => send(w, 'DELETE', '/v1/account/keys/..%2F..%2Fadmin', undefined) },
  { name: 'DELETE /v1/account/keys/* (glob)', status: 404, code: 'not_found', send: (w) => send(w, 'DELETE', '/v1/account/keys/key_*', undefined) },
  { name: 'DELETE /v1/account/keys/<8,000-character id>', status: 404, code: 'not_found', send: (w) => send(w, 'DELETE', `/v1/account/keys/key_${'k'.repeat(8000)}`, undefined) },
  { name: "DELETE /v1/account/keys/<another account's key id>", status: 404, code: 'not_found', send: (w) => send(w, 'DELETE', `/v1/account/keys/${w.otherKeyId}`, undefined) },
  {
    name: 'DELETE /v1/account/keys/<own spare key> with broken JSON body',
    status: 400,
    code: 'invalid_request',
    send: (w) => send(w, 'DELETE', `/v1/account/keys/${w.spareKeyId}`, '{"why":', jsonCT),
  },
  {
    name: 'DELETE /v1/account/keys/<own spare key> with a text/plain body',
    status: 415,
    code: 'unsupported_media_type',
    send: (w) => send(w, 'DELETE', `/v1/account/keys/${w.spareKeyId}`, 'revoke it', { 'content-type': 'text/plain' }),
  },
  { name: 'DELETE /v1/account/keys/<own spare key> with no credential', status: 401, code: 'unauthorized', send: (w) => send(w, 'DELETE', `/v1/account/keys/${w.spareKeyId}`, undefined, {}, 'none') },
  { name: 'DELETE /v1/account/keys (no id)', status: 405, code: 'method_not_allowed', send: (w) => send(w, 'DELETE', '/v1/account/keys', undefined) },
];

const admin: Case[] = [
  { name: 'POST /v1/admin/accounts with no credential', status: 401, code: 'unauthorized', send: (w) => postJson(w, '/v1/admin/accounts', '{"name":"x"}', 'none') },
  {
    name: 'POST /v1/admin/accounts with a wrong admin token',
    status: 401,
    code: 'unauthorized',
    send: (w) => postJson(w, '/v1/admin/accounts', '{"name":"x"}', 'none', { authorization: `Bearer ${ADMIN_TOKEN}x` }),
  },
  { name: 'POST /v1/admin/accounts with an account key', status: 401, code: 'unauthorized', send: (w) => postJson(w, '/v1/admin/accounts', '{"name":"x"}', 'acct') },
  {
    name: 'POST /v1/admin/accounts with Basic auth for a user other than admin',
    status: 401,
    code: 'unauthorized',
    send: (w) => postJson(w, '/v1/admin/accounts', '{"name":"x"}', 'none', { authorization: `Basic ${Buffer.from(`root:${ADMIN_TOKEN}`).toString('base64')}` }),
  },
  { name: 'POST /v1/admin/accounts with name missing', status: 400, code: 'invalid_request', send: (w) => adminCreate(w, { credits: 10 }) },
  { name: 'POST /v1/admin/accounts with name as a number', status: 400, code: 'invalid_request', send: (w) => adminCreate(w, { name: 7 }) },
  { name: 'POST /v1/admin/accounts with name empty', status: 400, code: 'invalid_request', send: (w) => adminCreate(w, { name: '' }) },
  { name: 'POST /v1/admin/accounts with a name of 201 characters', status: 400, code: 'invalid_request', send: (w) => adminCreate(w, { name: 'n'.repeat(201) }) },
  { name: 'POST /v1/admin/accounts with negative credits', status: 400, code: 'invalid_request', send: (w) => adminCreate(w, { name: 'x', credits: -1 }) },
  { name: 'POST /v1/admin/accounts with float credits', status: 400, code: 'invalid_request', send: (w) => adminCreate(w, { name: 'x', credits: 1.5 }) },
  { name: 'POST /v1/admin/accounts with credits as a string', status: 400, code: 'invalid_request', send: (w) => adminCreate(w, { name: 'x', credits: '100' }) },
  { name: 'POST /v1/admin/accounts with credits 1e16', status: 400, code: 'invalid_request', send: (w) => adminCreate(w, { name: 'x', credits: 1e16 }) },
  { name: 'POST /v1/admin/accounts with credits 1e400', status: 400, code: 'invalid_request', send: (w) => postJson(w, '/v1/admin/accounts', '{"name":"x","credits":1e400}', 'admin') },
  {
    name: 'POST /v1/admin/accounts with credits 2^53+1',
    status: 400,
    code: 'invalid_request',
    send: (w) => postJson(w, '/v1/admin/accounts', '{"name":"x","credits":9007199254740993}', 'admin'),
  },
  { name: 'POST /v1/admin/accounts with an extra field', status: 400, code: 'invalid_request', send: (w) => adminCreate(w, { name: 'x', credits: 10, id: 'acct_mine' }) },
  { name: 'POST /v1/admin/accounts with a JSON array', status: 400, code: 'invalid_request', send: (w) => postJson(w, '/v1/admin/accounts', '[{"name":"x"}]', 'admin') },
  { name: 'POST /v1/admin/accounts with JSON null', status: 400, code: 'invalid_request', send: (w) => postJson(w, '/v1/admin/accounts', 'null', 'admin') },
  { name: 'POST /v1/admin/accounts with truncated JSON', status: 400, code: 'invalid_request', send: (w) => postJson(w, '/v1/admin/accounts', '{"name":"x",', 'admin') },
  { name: 'POST /v1/admin/accounts with an empty body', status: 400, code: 'invalid_request', send: (w) => send(w, 'POST', '/v1/admin/accounts', undefined, jsonCT, 'admin') },
  {
    name: 'POST /v1/admin/accounts with a form-urlencoded body',
    status: 415,
    code: 'unsupported_media_type',
    send: (w) => send(w, 'POST', '/v1/admin/accounts', 'name=x&credits=10', { 'content-type': 'application/x-www-form-urlencoded' }, 'admin'),
  },
  { name: 'POST /v1/admin/accounts/{id}/credits with delta 0', status: 400, code: 'invalid_request', send: (w) => adminCredits(w, { delta: 0 }) },
  { name: 'POST /v1/admin/accounts/{id}/credits with delta -0', status: 400, code: 'invalid_request', send: (w) => postJson(w, `/v1/admin/accounts/${w.acct.id}/credits`, '{"delta":-0}', 'admin') },
  { name: 'POST /v1/admin/accounts/{id}/credits with a float delta', status: 400, code: 'invalid_request', send: (w) => adminCredits(w, { delta: 1.5 }) },
  { name: 'POST /v1/admin/accounts/{id}/credits with delta 0.0000001', status: 400, code: 'invalid_request', send: (w) => adminCredits(w, { delta: 1e-7 }) },
  { name: 'POST /v1/admin/accounts/{id}/credits with delta as a string', status: 400, code: 'invalid_request', send: (w) => adminCredits(w, { delta: '5' }) },
  { name: 'POST /v1/admin/accounts/{id}/credits with delta null', status: 400, code: 'invalid_request', send: (w) => adminCredits(w, { delta: null }) },
  { name: 'POST /v1/admin/accounts/{id}/credits with delta true', status: 400, code: 'invalid_request', send: (w) => adminCredits(w, { delta: true }) },
  { name: 'POST /v1/admin/accounts/{id}/credits with delta missing', status: 400, code: 'invalid_request', send: (w) => adminCredits(w, {}) },
  { name: 'POST /v1/admin/accounts/{id}/credits with delta 1e16', status: 400, code: 'invalid_request', send: (w) => adminCredits(w, { delta: 1e16 }) },
  { name: 'POST /v1/admin/accounts/{id}/credits with delta -1e16', status: 400, code: 'invalid_request', send: (w) => adminCredits(w, { delta: -1e16 }) },
  { name: 'POST /v1/admin/accounts/{id}/credits with delta 1e400', status: 400, code: 'invalid_request', send: (w) => postJson(w, `/v1/admin/accounts/${w.acct.id}/credits`, '{"delta":1e400}', 'admin') },
  { name: 'POST /v1/admin/accounts/{id}/credits with delta -1e400', status: 400, code: 'invalid_request', send: (w) => postJson(w, `/v1/admin/accounts/${w.acct.id}/credits`, '{"delta":-1e400}', 'admin') },
  { name: 'POST /v1/admin/accounts/{id}/credits with an extra field', status: 400, code: 'invalid_request', send: (w) => adminCredits(w, { delta: 5, reason: 'gift' }) },
  { name: 'POST /v1/admin/accounts/{id}/credits with a JSON array', status: 400, code: 'invalid_request', send: (w) => postJson(w, `/v1/admin/accounts/${w.acct.id}/credits`, '[5]', 'admin') },
  { name: 'POST /v1/admin/accounts/{id}/credits with a JSON number', status: 400, code: 'invalid_request', send: (w) => postJson(w, `/v1/admin/accounts/${w.acct.id}/credits`, '5', 'admin') },
  { name: 'POST /v1/admin/accounts/{id}/credits with a text/plain body', status: 415, code: 'unsupported_media_type', send: (w) => send(w, 'POST', `/v1/admin/accounts/${w.acct.id}/credits`, '{"delta":5}', { 'content-type': 'text/plain' }, 'admin') },
  { name: 'POST /v1/admin/accounts/{id}/credits with no credential', status: 401, code: 'unauthorized', send: (w) => postJson(w, `/v1/admin/accounts/${w.acct.id}/credits`, '{"delta":5}', 'none') },
  { name: 'POST /v1/admin/accounts/{id}/credits with an account key', status: 401, code: 'unauthorized', send: (w) => postJson(w, `/v1/admin/accounts/${w.acct.id}/credits`, '{"delta":5}', 'acct') },
  { name: 'POST /v1/admin/accounts/{id}/credits with an overdraft delta', status: 409, code: 'conflict', send: (w) => adminCredits(w, { delta: -1_000_000 }) },
  { name: 'POST /v1/admin/accounts/acct_bogus/credits (malformed id)', status: 404, code: 'not_found', send: (w) => adminCredits(w, { delta: 5 }, 'acct_bogus') },
  { name: 'POST /v1/admin/accounts/<well-formed unknown id>/credits', status: 404, code: 'not_found', send: (w) => adminCredits(w, { delta: 5 }, WELL_FORMED_ACCOUNT_ID) },
  { name: 'POST /v1/admin/accounts/..%2F..%2Fjobs/credits', status: 404, code: 'not_found', send: (w) => adminCredits(w, { delta: 5 }, '..%2F..%2Fjobs') },
  { name: 'POST /v1/admin/accounts/<8,000-character id>/credits', status: 404, code: 'not_found', send: (w) => adminCredits(w, { delta: 5 }, `acct_${'A'.repeat(8000)}`) },
];

/** Malformed HTTP, written byte for byte over TCP. */
const rawHttpCases: Case[] = [
  {
    name: 'RAW request with headers over the size limit (20 KiB)',
    status: 431,
    code: 'headers_too_large',
    send: (w) => rawHttp(w.gw, `GET /v1/jobs HTTP/1.1\r\nHost: ${hostOf(w.gw)}\r\nAuthorization: Bearer ${w.acct.key}\r\nX-Big: ${'b'.repeat(20 * 1024)}\r\nConnection: close\r\n\r\n`),
  },
  {
    name: 'RAW request with 500 headers totalling over the size limit',
    status: 431,
    code: 'headers_too_large',
    send: (w) => {
      const lines = Array.from({ length: 500 }, (_, i) => `X-H${i}: ${'v'.repeat(40)}\r\n`).join('');
      return rawHttp(w.gw, `GET /healthz HTTP/1.1\r\nHost: ${hostOf(w.gw)}\r\n${lines}Connection: close\r\n\r\n`);
    },
  },
  {
    name: 'RAW request with a URL over the size limit (20 KiB)',
    status: 431,
    code: 'headers_too_large',
    send: (w) => rawHttp(w.gw, `GET /v1/jobs/${'a'.repeat(20 * 1024)} HTTP/1.1\r\nHost: ${hostOf(w.gw)}\r\nConnection: close\r\n\r\n`),
  },
  { name: 'RAW request with a garbage request line', status: 400, code: 'invalid_request', send: (w) => rawHttp(w.gw, 'HELLO THERE\r\n\r\n') },
  { name: 'RAW request with HTTP/9.9', status: 400, code: 'invalid_request', send: (w) => rawHttp(w.gw, `GET /healthz HTTP/9.9\r\nHost: ${hostOf(w.gw)}\r\n\r\n`) },
  { name: 'RAW request with spaces inside the request target', status: 400, code: 'invalid_request', send: (w) => rawHttp(w.gw, `GET /v1/jobs x y HTTP/1.1\r\nHost: ${hostOf(w.gw)}\r\n\r\n`) },
  { name: 'RAW request with a header line without a colon', status: 400, code: 'invalid_request', send: (w) => rawHttp(w.gw, `GET /healthz HTTP/1.1\r\nHost: ${hostOf(w.gw)}\r\nNoColonHere\r\n\r\n`) },
  {
    name: 'RAW request with both Content-Length and Transfer-Encoding (smuggling)',
    status: 400,
    code: 'invalid_request',
    send: (w) =>
      rawHttp(
        w.gw,
        `POST /v1/jobs HTTP/1.1\r\nHost: ${hostOf(w.gw)}\r\nAuthorization: Bearer ${w.acct.key}\r\nContent-Type: application/json\r\nContent-Length: ${VALID_JOB_TEXT.length}\r\nTransfer-Encoding: chunked\r\n\r\n${VALID_JOB_TEXT.length.toString(16)}\r\n${VALID_JOB_TEXT}\r\n0\r\n\r\n`,
      ),
  },
  {
    name: 'RAW request with two Content-Length headers that disagree',
    status: 400,
    code: 'invalid_request',
    send: (w) =>
      rawHttp(
        w.gw,
        `POST /v1/jobs HTTP/1.1\r\nHost: ${hostOf(w.gw)}\r\nAuthorization: Bearer ${w.acct.key}\r\nContent-Type: application/json\r\nContent-Length: 5\r\nContent-Length: ${VALID_JOB_TEXT.length}\r\n\r\n${VALID_JOB_TEXT}`,
      ),
  },
  {
    name: 'RAW request with a chunked body whose chunk size is not hex',
    status: 400,
    code: 'invalid_request',
    send: (w) =>
      rawHttp(
        w.gw,
        `POST /v1/jobs HTTP/1.1\r\nHost: ${hostOf(w.gw)}\r\nAuthorization: Bearer ${w.acct.key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n${VALID_JOB_TEXT}\r\n0\r\n\r\n`,
      ),
  },
  {
    name: 'RAW request with a chunked body holding truncated JSON',
    status: 400,
    code: 'invalid_request',
    send: (w) =>
      rawHttp(
        w.gw,
        `POST /v1/jobs HTTP/1.1\r\nHost: ${hostOf(w.gw)}\r\nAuthorization: Bearer ${w.acct.key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n8\r\n{"kind":\r\n0\r\n\r\n`,
      ),
  },
];

const CORPUS: Case[] = [...jobsPost, ...jobsList, ...jobsById, ...keys, ...admin, ...rawHttpCases];

// ---------------------------------------------------------------------------------------------

/** Every key under the prefix, minus the ones the other account's accepted runs and the queues may write. */
async function snapshotKeys(prefix: string, ignoreAccountId: string): Promise<string[]> {
  const redis = new Redis(REDIS_URL);
  try {
    const found: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      found.push(...batch);
    } while (cursor !== '0');
    // The runs waiting to expire: a shared index, so its entries count, save the other account's.
    const expiring = `${prefix}:runs:expiring`;
    const entries = (await redis.zrange(expiring, '0', '-1')).filter((m) => !m.includes(ignoreAccountId)).map((m) => `${expiring} ${m}`);
    return found
      // The fleet's counts are each instance's own, rewritten on a timer: plumbing, not records.
      .filter((k) => !k.includes(ignoreAccountId) && !k.startsWith(`${prefix}:q:`) && !k.startsWith(`${prefix}:run:`) && !k.startsWith(`${prefix}:rl:`) && !k.startsWith(`${prefix}:fleet:`) && k !== `${prefix}:runs:unconfirmed` && k !== expiring)
      .concat(entries)
      .sort();
  } finally {
    redis.disconnect();
  }
}

describe('bad input', function () {
  const prefix = uniquePrefix('bad-input');
  const gw = new TestGateway(prefix);
  const w = { gw } as World;
  const CREDITS = 1000;
  let balanceBefore: { credits: number; reserved: number };
  let keysBefore: Array<{ id: string; revoked_at: string | null }>;
  let redisBefore: string[];

  before(async function () {
    await gw.start();
    w.acct = await gw.account(CREDITS, 'bad-input');
    w.other = await gw.account(CREDITS, 'bad-input-other');
    const spare = await gw.request('POST', '/v1/account/keys', { key: w.acct.key, body: { name: 'spare' } });
    assert.equal(spare.status, 201, spare.text);
    w.spareKeyId = spare.body.id;
    const otherKeys = await gw.request('GET', '/v1/account/keys', { key: w.other.key });
    assert.equal(otherKeys.status, 200, otherKeys.text);
    w.otherKeyId = otherKeys.body.data[0].id;

    const account = await gw.request('GET', '/v1/account', { key: w.acct.key });
    assert.equal(account.status, 200, account.text);
    balanceBefore = { credits: account.body.credits, reserved: account.body.reserved };
    assert.deepEqual(balanceBefore, { credits: CREDITS, reserved: 0 });
    const list = await gw.request('GET', '/v1/account/keys', { key: w.acct.key });
    keysBefore = list.body.data.map((k: { id: string; revoked_at: string | null }) => ({ id: k.id, revoked_at: k.revoked_at }));
    redisBefore = await snapshotKeys(prefix, w.other.id);
  });

  after(async function () {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  for (const c of CORPUS) {
    it(`${c.name} -> ${c.status} ${c.code}`, async function () {
      const res = await c.send(w);
      assertError(res, c.status, c.code);
      c.check?.(res, w);
    });
  }

  // Cases a careful server may accept: they run on the other account, so they cannot spoil the "nothing written" checks.

  it('POST /v1/jobs with 100,000 keys inside input (under the size limit) -> handled, never 5xx', async function () {
    const body = manyKeysJob(100_000);
    assert.ok(Buffer.byteLength(body) < 1024 * 1024, 'the body must stay under the 1 MiB limit for this case');
    const res = await gw.request('POST', '/v1/jobs', { raw: body, key: w.other.key, headers: jsonCT });
    assert.ok(res.status < 500, `a 5xx: ${res.status} ${res.text.slice(0, 500)}`);
    assert.ok(res.headers.get('x-request-id'));
    // The server accepts it: input schemas leave extra fields open and the body is under the limit.
    assert.equal(res.status, 202, `${res.status} ${res.text.slice(0, 500)}`);
    assert.match(res.body.run_id, /^run_[0-9A-Z]{26}$/);
    const job = await gw.request('GET', `/v1/jobs/${res.body.run_id}`, { key: w.other.key });
    assert.equal(job.status, 200, job.text.slice(0, 500));
    assert.equal(job.body.status, 'queued');
  });

  it('POST /v1/jobs with "constructor"/"prototype" keys inside input -> handled without pollution, never 5xx', async function () {
    const body = `{"kind":"${KIND}","input":{"prompt":"a cat","constructor":{"prototype":{"polluted":true}},"toString":"x","hasOwnProperty":1}}`;
    const res = await gw.request('POST', '/v1/jobs', { raw: body, key: w.other.key, headers: jsonCT });
    assert.ok(res.status < 500, `a 5xx: ${res.status} ${res.text.slice(0, 500)}`);
    assert.ok(res.headers.get('x-request-id'));
    if (res.status >= 400) assertError(res, res.status, errorCode(res));
    else assert.equal(res.status, 202, res.text);
    assert.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype was polluted');
    const again = await gw.request('GET', '/v1/account', { key: w.other.key });
    assert.equal(again.status, 200, 'the server still answers the same account');
  });

  // Nothing was written, and the server still answers.

  it('after the corpus: the balance is unchanged (credits and reserved)', async function () {
    const account = await gw.request('GET', '/v1/account', { key: w.acct.key });
    assert.equal(account.status, 200, account.text);
    assert.deepEqual({ credits: account.body.credits, reserved: account.body.reserved }, balanceBefore);
  });

  it('after the corpus: GET /v1/jobs lists zero runs', async function () {
    const list = await gw.request('GET', '/v1/jobs?limit=100', { key: w.acct.key });
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(list.body.data, []);
    assert.equal(list.body.next_cursor, null);
  });

  it('after the corpus: no API key was created or revoked', async function () {
    const list = await gw.request('GET', '/v1/account/keys', { key: w.acct.key });
    assert.equal(list.status, 200, list.text);
    const now = list.body.data.map((k: { id: string; revoked_at: string | null }) => ({ id: k.id, revoked_at: k.revoked_at }));
    assert.deepEqual(now, keysBefore);
    const other = await gw.request('GET', '/v1/account', { key: w.other.key });
    assert.equal(other.status, 200, "the other account's key must still work");
  });

  it('after the corpus: no record was added to the store (no account, key, run or idempotency record)', async function () {
    assert.deepEqual(await snapshotKeys(prefix, w.other.id), redisBefore);
  });

  it('after the corpus: GET /healthz still answers 200', async function () {
    const res = await gw.request('GET', '/healthz');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { status: 'ok' });
    assert.ok(res.headers.get('x-request-id'));
  });
});
