import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix } from './helpers/harness.js';
import { dataUri, samplePng } from './helpers/sample-files.js';

/**
 * `GET /v1/jobs/{run_id}?include=input` (docs/api.md, "The job object"): the job object and the
 * input the run was given, as stored, file fields as the references the run used. Nothing else
 * carries the input, an unknown `include` is a 400, and another account's run stays a 404.
 */
describe('jobs API: include=input', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('jobs-include-input');
  const gw = new TestGateway(prefix);
  let owner: { id: string; key: string };

  before(async () => {
    await gw.start();
    owner = await gw.account(10_000, 'include-input');
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  const submit = async (kind: string, input: Record<string, unknown>) => {
    const res = await gw.submit(owner.key, { kind, input });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };

  it('answers the job object plus its input exactly as sent, and nothing more', async () => {
    // An extra field the kind does not name is forwarded too, nested values and all.
    const input = { prompt: 'a lighthouse at dusk\nwith "quotes" and ünïcödé', width: 96, height: 64, seed: 0, style: { palette: ['teal', 'amber'], strength: 0.5, on: false } };
    const runId = await submit('inference:image:generate', input);
    const plain = await gw.request('GET', `/v1/jobs/${runId}`, { key: owner.key });
    const res = await gw.request('GET', `/v1/jobs/${runId}?include=input`, { key: owner.key });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.input, input);
    const { input: _input, ...job } = res.body;
    assert.deepEqual(job, plain.body, 'the rest is the job object as without include');
    assert.equal('input' in plain.body, false, 'without include the job object has no input');
    // A list naming it twice is the same request.
    assert.deepEqual((await gw.request('GET', `/v1/jobs/${runId}?include=input,input`, { key: owner.key })).body.input, input);
  });

  it('leaves the input out of the listing, the 202 and the events', async () => {
    const input = { prompt: 'not in the listing' };
    const accepted = await gw.submit(owner.key, { kind: 'inference:image:generate', input });
    assert.equal('input' in accepted.body, false);
    const list = await gw.request('GET', '/v1/jobs?limit=5', { key: owner.key });
    assert.equal(list.status, 200, list.text);
    assert.ok(list.body.data.length > 0);
    for (const j of list.body.data) assert.equal('input' in j, false, `${j.run_id} in the listing carries no input`);
    const events = await fetch(`${gw.url}/v1/jobs/${accepted.body.run_id}/events`, { headers: { authorization: `Bearer ${owner.key}` }, signal: AbortSignal.timeout(2_000) });
    const reader = events.body!.getReader();
    let first = '';
    // Up to the end of the first event that holds the job (a comment line may come before it).
    while (!/"run_id"[^]*\n\n/.test(first)) {
      const { value, done } = await reader.read();
      if (done) break;
      first += new TextDecoder().decode(value);
    }
    await reader.cancel();
    assert.match(first, /"run_id"/, 'the first status event holds the job');
    assert.doesNotMatch(first, /not in the listing/);
  });

  it('gives a file field as the file the gateway staged: a data: URI comes back as the id of the file made of it', async () => {
    const png = samplePng(8, 3);
    const runId = await submit('inference:3d:image-to-mesh', { image: dataUri('image/png', png), seed: 3 });
    const res = await gw.request('GET', `/v1/jobs/${runId}?include=input`, { key: owner.key });
    assert.equal(res.status, 200, res.text);
    assert.match(res.body.input.image, /^file_/);
    assert.equal(res.body.input.seed, 3);
    assert.deepEqual(res.body.input, (await gw.stores.runs.get(runId))!.input, 'the input as the store keeps it');
    const file = await gw.request('GET', `/v1/files/${res.body.input.image}`, { key: owner.key });
    assert.equal(file.body.sha256, createHash('sha256').update(png).digest('hex'), 'the id names the bytes that were sent');
  });

  it("answers 404 for another account's run, with or without include", async () => {
    const runId = await submit('inference:image:generate', { prompt: 'mine' });
    const stranger = await gw.account(10, 'include-input-stranger');
    for (const path of [`/v1/jobs/${runId}`, `/v1/jobs/${runId}?include=input`]) {
      const res = await gw.request('GET', path, { key: stranger.key });
      assert.equal(res.status, 404, path);
      assert.equal(errorCode(res), 'not_found');
      assert.doesNotMatch(res.text, /mine/);
    }
    assert.equal((await gw.request('GET', `/v1/jobs/${runId}?include=input`)).status, 401);
  });

  it('answers 400 invalid_request naming /include for a value it does not know', async () => {
    const runId = await submit('inference:image:generate', { prompt: 'x' });
    for (const include of ['inputs', 'input,output', '', 'input,', 'INPUT']) {
      const res = await gw.request('GET', `/v1/jobs/${runId}?include=${encodeURIComponent(include)}`, { key: owner.key });
      assert.equal(res.status, 400, `include=${include}: ${res.text}`);
      assert.equal(errorCode(res), 'invalid_request');
      assert.equal(res.body.error.details.path, '/include');
      assert.deepEqual(res.body.error.details.allowed, ['input']);
    }
    // Named twice as separate parameters: not a string, refused by the query schema.
    const twice = await gw.request('GET', `/v1/jobs/${runId}?include=input&include=input`, { key: owner.key });
    assert.equal(twice.status, 400, twice.text);
    assert.equal(errorCode(twice), 'invalid_request');
  });
});
