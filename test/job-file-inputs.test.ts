import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { KINDS } from '../models/kinds.js';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';

/**
 * Job inputs that name a file the worker fetches (image, mesh, audio, reference_audio ...) take
 * an https URL or a data: URI, and nothing else: anything else would be a paid run that can only
 * fail, or a worker reading its own disk. The fields come from the catalogue itself, so a kind
 * added later with a file input is covered too.
 */
const FILE_FIELDS: Array<[kind: string, field: string]> = KINDS.flatMap((spec) =>
  Object.entries((spec.inputSchema.properties ?? {}) as Record<string, { description?: string }>)
    .filter(([, prop]) => prop.description === 'an https URL or a data: URI')
    .map(([field]) => [spec.kind, field] as [string, string]),
);
const REFUSED = ['file:///etc/passwd', 'not a url', 'http://example.com/a.png', 'ftp://example.com/a.png', 'https://', '/etc/passwd', 'javascript:alert(1)'];
const ACCEPTED = ['https://example.com/a.png', 'data:image/png;base64,iVBORw0KGgo='];

/** An input valid for every kind but for `field`. */
const inputWith = (field: string, value: string) => ({ prompt: 'a cat', text: 'hello', [field]: value });

describe('job file inputs: only https URLs and data: URIs', function () {
  const prefix = uniquePrefix('file-inputs');
  const gw = new TestGateway(prefix);
  const CREDITS = 10_000;
  let caller: { id: string; key: string };

  before(async () => {
    await gw.start();
    caller = await gw.account(CREDITS, 'file-inputs');
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('the catalogue has the file inputs this test is about', () => {
    const fields = new Set(FILE_FIELDS.map(([, field]) => field));
    for (const field of ['image', 'mesh', 'audio', 'reference_audio']) assert.ok(fields.has(field), `no kind has a ${field} file input`);
  });

  it('POST /v1/jobs refuses every other value with 400 invalid_request naming the field', async () => {
    for (const [kind, field] of FILE_FIELDS) {
      for (const value of REFUSED) {
        const res = await gw.submit(caller.key, { kind, input: inputWith(field, value) });
        assert.equal(res.status, 400, `${kind} ${field}=${JSON.stringify(value)}: ${res.text}`);
        assert.equal(errorCode(res), 'invalid_request');
        assert.match(res.body.error.message, new RegExp(`/input/${field} must be an https URL or a data: URI`));
      }
    }
  });

  it('a submit on the caller WebSocket refuses them the same way, with an error frame naming the field', async () => {
    const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/v1/ws`, { headers: { authorization: `Bearer ${caller.key}` } });
    const messages: Array<Record<string, any>> = [];
    ws.on('message', (data) => messages.push(JSON.parse(data.toString())));
    await until('authenticated', async () => messages.some((m) => m.type === 'authenticated'));
    try {
      let id = 0;
      for (const [kind, field] of FILE_FIELDS) {
        for (const value of REFUSED) {
          const sent = `bad-${++id}`;
          ws.send(JSON.stringify({ type: 'submit', id: sent, kind, input: inputWith(field, value) }));
          const answer = await until(`an answer to ${sent}`, async () => messages.find((m) => m.id === sent));
          assert.equal(answer.type, 'error', `${kind} ${field}=${JSON.stringify(value)}: ${JSON.stringify(answer)}`);
          assert.equal(answer.code, 'invalid_request');
          assert.match(answer.message, new RegExp(`/input/${field} must be an https URL or a data: URI`));
        }
      }
    } finally {
      ws.close();
    }
  });

  it('after the refusals: no run exists and the balance is untouched', async () => {
    const account = await gw.request('GET', '/v1/account', { key: caller.key });
    assert.equal(account.status, 200, account.text);
    assert.deepEqual({ credits: account.body.credits, reserved: account.body.reserved }, { credits: CREDITS, reserved: 0 });
    const list = await gw.request('GET', '/v1/jobs?limit=100', { key: caller.key });
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(list.body.data, []);
  });

  it('the same inputs with an https URL or a data: URI are accepted (on another account)', async () => {
    const other = await gw.account(CREDITS, 'file-inputs-accepted');
    for (const [kind, field] of FILE_FIELDS) {
      for (const value of ACCEPTED) {
        const res = await gw.submit(other.key, { kind, input: inputWith(field, value) });
        assert.equal(res.status, 202, `${kind} ${field}=${JSON.stringify(value)}: ${res.text}`);
      }
    }
  });
});
