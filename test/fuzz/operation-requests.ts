import fc from 'fast-check';
import { ADMIN_TOKEN } from '../helpers/harness.js';
import { resolveRefs } from '../helpers/openapi-doc.js';
import type { FuzzWorld } from './fuzz-world.js';
import { jsonBodyArbitrary, rawBodyArbitrary, strayBodyArbitrary, type BodyShape } from './malformed-body.js';
import type { FuzzRequest } from './raw-http.js';
import { schemaArbitrary } from './schema-arbitrary.js';

/** One operation of the served document, as the fuzzer reads it. */
export interface Operation {
  operationId: string;
  method: string;
  path: string;
  op: any;
  /** Its error answers are OpenAI's shape (the document's OpenAIError schema), not the envelope. */
  openAiErrors: boolean;
  auth: 'account' | 'admin' | 'upload' | 'none';
}

/** Every operation of `doc`. */
export function operationsOf(doc: any): Operation[] {
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(methods)) {
      const security = JSON.stringify(op.security ?? []);
      const auth = security.includes('bearer') ? 'account' : security.includes('admin') ? 'admin' : security.includes('uploadToken') ? 'upload' : 'none';
      ops.push({ operationId: op.operationId, method: method.toUpperCase(), path, op, openAiErrors: JSON.stringify(op.responses).includes('OpenAIError'), auth });
    }
  }
  return ops;
}

/**
 * Path parameters that are no id of anything: odd characters, encodings that do not decode,
 * lengths past any id. Percent-encoded as a client would send them, and a few raw bytes past ASCII (invalid UTF-8 on the
 * request line), the most node:http lets through.
 */
const ODD_SEGMENTS = ['..', '%2e%2e', '.', '%00', '%', '%zz', '%C0%AF', '%FF%FE', 'a%2Fb', '%F0%9F%98%80', 'x'.repeat(5000), "'%3B%20DROP", '%7Brun_id%7D', '%20', '%E2%80%AE', 'run_' + '0'.repeat(26), '-1', '__proto__', 'constructor', '%0D%0AX-Injected:%201', 'null', '\u00ff\u00c0', '\u00e9t\u00e9'];

/**
 * Valid-shaped values for a path parameter by name: ids of A's (that A may touch), ids of B's
 * (that A must not touch), well-formed ids of nothing. Admin routes never get B's account id,
 * since an admin may change any account and B must stay as it was.
 */
function pathValues(world: FuzzWorld, name: string, doc: any): string[] {
  const { a, b } = world;
  const kinds: string[] = doc.components.schemas.Kind?.enum ?? ['inference:image:generate'];
  switch (name) {
    case 'run_id':
      return [a.runId, b.runId, 'run_01ARZ3NDEKTSV4RRFFQ69G5FAV'];
    case 'batch_id':
      return [a.batchId, b.batchId, 'batch_01ARZ3NDEKTSV4RRFFQ69G5FAV'];
    case 'key_id':
      return [...a.spareKeyIds, b.keyId, ...b.spareKeyIds, 'key_aaaaaaaaaaaaaaaa'];
    case 'file_id':
      return [a.fileId, b.fileId, 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV'];
    case 'bot_id':
      return [a.botId, b.botId, 'bot_01ARZ3NDEKTSV4RRFFQ69G5FAV'];
    case 'id':
      return [a.toolId, b.toolId, 'tool_01ARZ3NDEKTSV4RRFFQ69G5FAV'];
    case 'account_id':
      return [a.id, 'acct_01ARZ3NDEKTSV4RRFFQ69G5FAV'];
    case 'operator_id':
      return [world.operatorId, 'op_01ARZ3NDEKTSV4RRFFQ69G5FAV'];
    case 'kind':
      return kinds.map(encodeURIComponent);
    case 'model':
      return ['default', 'fuzz-model', 'llama-3.1-8b-instruct'];
    default:
      return ['x', `${name}_01ARZ3NDEKTSV4RRFFQ69G5FAV`];
  }
}

const pathParamArb = (values: string[]) => fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...values) }, { weight: 1, arbitrary: fc.constantFrom(...ODD_SEGMENTS) });

/** A query value of `schema`, as text; sometimes an odd one. */
function queryValueArb(schema: any, doc: any): fc.Arbitrary<string> {
  const valid = schemaArbitrary(resolveRefs(schema, doc) as object).map((v) => encodeURIComponent(typeof v === 'string' ? v : JSON.stringify(v)));
  return fc.oneof({ weight: 4, arbitrary: valid }, { weight: 1, arbitrary: fc.constantFrom('', '%', '%zz', '-1', '1e999', '99999999999999999999', 'x'.repeat(3000), '%00', 'true', '[]', '%C0%80') });
}

/** Header values a header takes (valid-shaped), and odd ones node:http still sends. */
const ODD_HEADER = ['', ' ', 'x'.repeat(6000), '\u00ff\u00fe', 'null', '-1', '"unterminated', 'bytes=', 'bytes=99999999999999999999-', 'bytes=5-1', 'bytes=0-0,0-0,0-0', '*', 'W/""', 'wait=99999', 'wait=-1', 'wait=1.5', 'respond-async, wait=0'];
function headerArb(param: any, world: FuzzWorld): fc.Arbitrary<string> {
  const name = String(param.name).toLowerCase();
  const valid: Record<string, string[]> = {
    'idempotency-key': ['k1', 'k2', `k-${'z'.repeat(200)}`],
    prefer: ['wait=0', 'respond-async', 'return=minimal'],
    'last-event-id': ['0', '1', '999999', 'abc'],
    range: ['bytes=0-1', 'bytes=2-', 'bytes=-3'],
    'if-none-match': ['"x"', '*'],
    'if-range': ['"x"', 'Wed, 21 Oct 2015 07:28:00 GMT'],
    origin: ['https://shop.example', 'null', 'https://evil.example'],
    authorization: [`Bearer ${world.a.key}`, 'Bearer swt_x', 'Basic Zm9vOmJhcg=='],
    'content-type': ['application/octet-stream', 'image/png'],
  };
  return fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...(valid[name] ?? ['x'])) }, { weight: 1, arbitrary: fc.constantFrom(...ODD_HEADER) });
}

/** The credential of a fuzzed request: mostly the route's own, sometimes none or a wrong one. */
function credentialArb(o: Operation, world: FuzzWorld): fc.Arbitrary<{ headers: Record<string, string>; label: string }> {
  const none = { headers: {}, label: 'auth:none' };
  const wrong = [
    { headers: { authorization: 'Bearer sy_wrongwrongwrongwrongwrongwrongwrongwrongwrong' }, label: 'auth:wrong-key' },
    { headers: { authorization: 'Bearer' }, label: 'auth:empty-bearer' },
    { headers: { authorization: 'Basic Zm9vOmJhcg==' }, label: 'auth:basic' },
    { headers: { 'x-service-key': 'sy_nope' }, label: 'auth:wrong-service-key' },
    { headers: { authorization: `Bearer ${world.a.key}`, 'x-service-key': world.b.key }, label: 'auth:two-keys' },
  ];
  const asA = { headers: { authorization: `Bearer ${world.a.key}` }, label: 'auth:A' };
  const asAServiceKey = { headers: { 'x-service-key': world.a.key }, label: 'auth:A-service-key' };
  const admin = { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, label: 'auth:admin' };
  // B's key only reads: a write with it would change B, which is what the run checks did not happen.
  const asB = o.method === 'GET' && o.auth === 'account' ? [{ headers: { authorization: `Bearer ${world.b.key}` }, label: 'auth:B' }] : [];
  const own = o.auth === 'admin' ? [admin] : o.auth === 'account' ? [asA, asAServiceKey] : [none];
  return fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...own, ...asB) }, { weight: 2, arbitrary: fc.constantFrom(none, ...wrong, asA, admin) });
}

/**
 * Requests of one operation, each with its path parameters, query, headers, credential and
 * body drawn from the operation's schemas, valid-shaped or malformed.
 */
export function operationRequests(o: Operation, world: FuzzWorld): fc.Arbitrary<FuzzRequest> {
  const doc = world.doc;
  const params: any[] = o.op.parameters ?? [];
  const pathNames = params.filter((p) => p.in === 'path').map((p) => p.name as string);
  const queryParams = params.filter((p) => p.in === 'query');
  const headerParams = params.filter((p) => p.in === 'header' && String(p.name).toLowerCase() !== 'authorization');

  const pathArb = fc.tuple(...pathNames.map((n) => pathParamArb(pathValues(world, n, doc)))).map((vals) => pathNames.reduce((p, n, i) => p.replace(`{${n}}`, vals[i]), o.path));
  const queryArb = fc
    .tuple(
      fc.subarray(queryParams).chain((chosen) => fc.tuple(...chosen.map((q) => queryValueArb(q.schema, doc).map((v) => `${encodeURIComponent(q.name)}=${v}`)))),
      fc.oneof({ weight: 6, arbitrary: fc.constant<string[]>([]) }, { weight: 1, arbitrary: fc.constantFrom(['zz_unknown=1'], ['limit=1', 'limit=2'], ['a[b]=1'], ['='], ['&&']) }),
    )
    .map(([known, odd]) => (known.length + odd.length ? `?${[...known, ...odd].join('&')}` : ''));
  const headersArb = fc.subarray(headerParams).chain((chosen) => fc.tuple(...chosen.map((h) => headerArb(h, world).map((v) => [String(h.name).toLowerCase(), v] as const)))).map((pairs) => Object.fromEntries(pairs));

  const content = o.op.requestBody?.content ?? {};
  let bodyArb: fc.Arbitrary<BodyShape>;
  if (content['application/json']) bodyArb = jsonBodyArbitrary(schemaArbitrary(resolveRefs(content['application/json'].schema, doc) as object));
  else if (content['*/*']) bodyArb = rawBodyArbitrary();
  else bodyArb = strayBodyArbitrary();

  return fc.record({ path: pathArb, query: queryArb, headers: headersArb, cred: credentialArb(o, world), body: bodyArb }).map(({ path, query, headers, cred, body }) => ({
    operationId: o.operationId,
    method: o.method,
    path: path + query,
    headers: { ...headers, ...cred.headers, ...body.extraHeaders, ...(body.contentType ? { 'content-type': body.contentType } : {}) },
    body: body.bytes,
    variant: [cred.label, body.variant],
  }));
}
