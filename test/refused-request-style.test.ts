import assert from 'node:assert/strict';
import net from 'node:net';
import { TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

/**
 * A request Node's HTTP parser refuses (here raw bytes past ASCII in the path, which is not
 * HTTP) never reaches a route, yet its error comes in the shape of the route its path names:
 * OpenAI's on the OpenAI surface, the envelope elsewhere. Found by the fuzzer (test/fuzz/,
 * docs/reliability.md "Fuzzing"): `GET /v1/models/été` was answered in the envelope.
 */
describe('a request the HTTP parser refuses', function () {
  this.timeout(20_000);
  const prefix = uniquePrefix('refused-style');
  let gw: TestGateway;
  before(async () => {
    gw = await new TestGateway(prefix).start();
  });
  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  /** Writes `path` (as latin1 bytes) on a request line and reads the whole answer. */
  async function rawGet(path: string): Promise<{ status: number; body: any }> {
    const { port } = new URL(gw.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    socket.write(Buffer.from(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`, 'latin1'));
    const chunks: Buffer[] = [];
    for await (const c of socket) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]), body: JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) };
  }

  it("answers on an OpenAI route in OpenAI's shape", async () => {
    const res = await rawGet('/v1/models/\u00e9t\u00e9');
    assert.equal(res.status, 400);
    assert.equal(res.body.error.type, 'invalid_request_error');
    assert.ok('param' in res.body.error && typeof res.body.error.message === 'string', JSON.stringify(res.body));
  });

  it('answers elsewhere in the error envelope', async () => {
    const res = await rawGet('/v1/jobs/\u00e9t\u00e9?x=1');
    assert.equal(res.status, 400);
    assert.deepEqual(Object.keys(res.body.error).sort(), ['code', 'message']);
    assert.equal(res.body.error.code, 'invalid_request');
  });
});
