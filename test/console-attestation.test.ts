import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { decodeJwt, exportJWK, generateKeyPair } from 'jose';
import { DEV_VERIFIER_ISSUER } from '../api/main/dev/dev-attestation.js';
import { ConsoleHarness } from './helpers/console-harness.js';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';
import { samplePng } from './helpers/sample-files.js';

/** The claims a receipt signs (read, not verified: the page verifies them). */
const receiptClaims = (receipt: string) => decodeJwt(receipt) as { input_sha256: string; input_files?: Record<string, string> };

/**
 * A private run's attestation panel on the console's run page: the browser verifies the
 * receipt and the TEST evidence of the dev fleet's private worker with the client library,
 * against the keys the gateway trusts (GET /v1/attestation/verifier-keys), and fails the
 * evidence signature check when given another verifier's key.
 */
describe('console attestation panel', function () {
  this.timeout(180_000);
  const h = new ConsoleHarness('attestation', { privateTier: true, delayMs: 50 });
  before(async function () {
    await h.start(this);
  });
  after(async () => h.stop());

  /** The JWKS the harness made the gateway trust (ATTESTATION_JWKS). */
  const trusted = () => JSON.parse(readFileSync(path.resolve(h.gw.config.attestation.jwks!), 'utf8')) as { keys: Array<Record<string, unknown>> };

  it('answers the verifier keys the gateway trusts, with its issuer, to an account key only', async () => {
    const res = await h.gw.request('GET', '/v1/attestation/verifier-keys', { key: h.account.key });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.issuer, DEV_VERIFIER_ISSUER);
    assert.deepEqual(res.body.keys, trusted().keys);
    assert.ok(res.body.keys.every((k: Record<string, unknown>) => !('d' in k)), 'public keys only');
    assert.deepEqual(res.body.driver_versions, []);
    assert.equal((await h.gw.request('GET', '/v1/attestation/verifier-keys')).status, 401);
  });

  it('answers 404 not_found when the private tier is off', async () => {
    const prefix = uniquePrefix('verifier-keys-off');
    const gw = await new TestGateway(prefix).start();
    try {
      const { key } = await gw.account(10);
      const res = await gw.request('GET', '/v1/attestation/verifier-keys', { key });
      assert.equal(res.status, 404);
      assert.equal(errorCode(res), 'not_found');
    } finally {
      await gw.stop();
      await cleanupPrefix(prefix);
    }
  });

  it('answers a key set it fetches from a URL without private members, and 503 while the URL fails', async () => {
    const { privateKey } = await generateKeyPair('ES384', { extractable: true });
    const jwk = { ...(await exportJWK(privateKey)), kid: 'remote-1', alg: 'ES384' };
    let failing = true;
    const server = http.createServer((_req, res) => {
      res.writeHead(failing ? 500 : 200, { 'content-type': 'application/json' });
      res.end(failing ? '{}' : JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const prefix = uniquePrefix('verifier-keys-url');
    const gw = await new TestGateway(prefix, { ATTESTATION_JWKS: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`, ATTESTATION_ISSUER: 'urn:test:remote' }).start();
    try {
      const { key } = await gw.account(10);
      const down = await gw.request('GET', '/v1/attestation/verifier-keys', { key });
      assert.equal(down.status, 503);
      assert.equal(errorCode(down), 'unavailable');
      failing = false;
      const res = await gw.request('GET', '/v1/attestation/verifier-keys', { key });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.issuer, 'urn:test:remote');
      const { d: _d, ...pub } = jwk;
      assert.deepEqual(res.body.keys, [pub], 'the private member d is never handed out');
    } finally {
      await gw.stop();
      await cleanupPrefix(prefix);
      server.close();
    }
  });

  /** A private run of `kind`, submitted through the API and waited for until it succeeded. */
  async function privateRun(kind: string, input: Record<string, unknown>) {
    const submitted = await h.gw.submit(h.account.key, { kind, input, confidentiality: 'private' });
    assert.equal(submitted.status, 202, submitted.text);
    const runId = submitted.body.run_id as string;
    const job = await until('the private run succeeds', async () => {
      const j = (await h.gw.request('GET', `/v1/jobs/${runId}`, { key: h.account.key })).body;
      return j.status === 'succeeded' ? j : null;
    }, 60_000);
    return { runId, job };
  }

  it("verifies a private run in the browser and lists each check; another verifier's key fails the evidence signature", async () => {
    const { runId, job } = await privateRun('inference:image:generate', { prompt: 'a lighthouse at dusk' });
    assert.ok(job.attestation, 'the run carries its attestation');

    const tab = await h.signedInTab();
    await h.open(tab, `/runs/${runId}`);
    const panel = tab.page.locator('section.attestation');
    await panel.getByText('Verified: every check passed').waitFor({ timeout: 30_000 });
    const outcome = (id: string) => panel.locator(`[data-check="${id}"]`).getAttribute('data-outcome');
    for (const id of ['shape', 'evidence-signature', 'evidence-issuer', 'evidence-fresh', 'nonce', 'gpu', 'versions', 'artifacts-downloaded', 'receipt-signature', 'receipt-claims', 'artifacts']) {
      assert.equal(await outcome(id), 'passed', id);
    }
    // The input the gateway reports (GET ?include=input), hashed here, is the one the worker signed.
    assert.equal(await outcome('input'), 'passed');
    const signed = receiptClaims(job.attestation.receipt);
    assert.match((await panel.locator('[data-check="input"] .check-detail').textContent()) ?? '', new RegExp(`input_sha256 ${signed.input_sha256}`));
    await tab.page.locator('[data-input-field="prompt"] p', { hasText: 'a lighthouse at dusk' }).waitFor();
    await panel.getByText('The input checked is the one the gateway reports for this run').waitFor();
    // What was checked: the issuer, and each artifact by the sha256 the gateway recorded.
    await panel.locator('code', { hasText: DEV_VERIFIER_ISSUER }).first().waitFor();
    const artifacts = (await panel.locator('[data-check="artifacts"] .check-detail').textContent()) ?? '';
    for (const f of job.output.files as Array<{ sha256: string }>) assert.ok(artifacts.includes(f.sha256), `${f.sha256} listed`);
    await panel.getByText("the ones the gateway trusts").waitFor();
    assert.deepEqual(await h.seriousViolations(tab.page), []);
    await h.screenshots(tab.page, 'run-private');

    // Another verifier's key under the same kid: the evidence is not its signature.
    const { publicKey } = await generateKeyPair('ES384', { extractable: true });
    const wrong = { keys: [{ ...(await exportJWK(publicKey)), kid: trusted().keys[0].kid, alg: 'ES384', use: 'sig' }] };
    await panel.getByText('Use other verifier keys').click();
    await panel.getByLabel('Verifier keys (JWKS JSON)').fill(JSON.stringify(wrong));
    await panel.getByRole('button', { name: 'Verify with these keys' }).click();
    await panel.getByText(/Verification failed: Evidence signature/).waitFor();
    assert.equal(await outcome('evidence-signature'), 'failed');
    assert.match((await panel.locator('[data-check="evidence-signature"] .check-detail').textContent()) ?? '', /bad_signature: .*invalid signature/);
    assert.equal(await outcome('shape'), 'passed');
    assert.equal(await outcome('receipt-signature'), 'not checked');
    await panel.getByText('the key set you pasted').waitFor();
    assert.deepEqual(await h.seriousViolations(tab.page), []);
    await h.screenshots(tab.page, 'run-private-wrong-key');

    // The gateway's keys again: it passes again.
    await panel.getByLabel('Verifier keys (JWKS JSON)').fill(JSON.stringify(trusted()));
    await panel.getByRole('button', { name: 'Verify with these keys' }).click();
    await panel.getByText('Verified: every check passed with the pasted keys').waitFor();
    h.assertSameOrigin();
  });

  it('checks an input file by its bytes, downloaded here; once the file is deleted, the input is not checked, and says why', async () => {
    const png = samplePng(32, 7);
    const uploaded = await h.gw.request('POST', '/v1/files?filename=photo.png', { raw: png, key: h.account.key, headers: { 'content-type': 'image/png' } });
    assert.equal(uploaded.status, 201, uploaded.text);
    const fileId = uploaded.body.id as string;
    const { runId, job } = await privateRun('inference:3d:image-to-mesh', { image: fileId, seed: 5 });
    const signed = receiptClaims(job.attestation.receipt);
    const sha256 = createHash('sha256').update(png).digest('hex');
    assert.equal(signed.input_files?.image, sha256, 'the worker signed the file by its bytes');

    const tab = await h.signedInTab();
    await h.open(tab, `/runs/${runId}`);
    const panel = tab.page.locator('section.attestation');
    await panel.getByText('Verified: every check passed').waitFor({ timeout: 30_000 });
    const outcome = (id: string) => panel.locator(`[data-check="${id}"]`).getAttribute('data-outcome');
    assert.equal(await outcome('input'), 'passed');
    assert.match((await panel.locator('[data-check="input"] .check-detail').textContent()) ?? '', new RegExp(`image ${sha256}`));
    // The Input section names the file by its id.
    await tab.page.locator('[data-input-field="image"] dd code', { hasText: fileId }).waitFor();
    assert.deepEqual(await h.seriousViolations(tab.page), []);

    // Without the file's bytes the digest cannot be computed here: not checked, with the reason; the rest still passes.
    assert.equal((await h.gw.request('DELETE', `/v1/files/${fileId}`, { key: h.account.key })).status, 204);
    await tab.page.reload();
    await panel.getByText(/Verified: every check made passed .*; the input was not checked/).waitFor({ timeout: 30_000 });
    assert.equal(await outcome('input'), 'not checked');
    assert.match((await panel.locator('[data-check="input"] .check-detail').textContent()) ?? '', /input\.image .* could not be downloaded to hash it \(HTTP 404\)/);
    for (const id of ['evidence-signature', 'receipt-signature', 'receipt-claims', 'artifacts']) assert.equal(await outcome(id), 'passed', id);
    h.assertSameOrigin();
  });
});
