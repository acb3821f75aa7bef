import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { exportJWK, generateKeyPair } from 'jose';
import { DEV_VERIFIER_ISSUER } from '../api/main/dev/dev-attestation.js';
import { ConsoleHarness } from './helpers/console-harness.js';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';

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

  it("verifies a private run in the browser and lists each check; another verifier's key fails the evidence signature", async () => {
    const submitted = await h.gw.submit(h.account.key, { kind: 'inference:image:generate', input: { prompt: 'a lighthouse at dusk' }, confidentiality: 'private' });
    assert.equal(submitted.status, 202, submitted.text);
    const runId = submitted.body.run_id as string;
    const job = await until('the private run succeeds', async () => {
      const j = (await h.gw.request('GET', `/v1/jobs/${runId}`, { key: h.account.key })).body;
      return j.status === 'succeeded' ? j : null;
    }, 60_000);
    assert.ok(job.attestation, 'the run carries its attestation');

    const tab = await h.signedInTab();
    await h.open(tab, `/runs/${runId}`);
    const panel = tab.page.locator('section.attestation');
    await panel.getByText('Verified: every check passed').waitFor({ timeout: 30_000 });
    const outcome = (id: string) => panel.locator(`[data-check="${id}"]`).getAttribute('data-outcome');
    for (const id of ['shape', 'evidence-signature', 'evidence-issuer', 'evidence-fresh', 'nonce', 'gpu', 'versions', 'artifacts-downloaded', 'receipt-signature', 'receipt-claims', 'artifacts']) {
      assert.equal(await outcome(id), 'passed', id);
    }
    assert.equal(await outcome('input'), 'skipped', 'the job object has no input to check');
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
});
