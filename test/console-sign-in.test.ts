import assert from 'node:assert/strict';
import { ConsoleHarness } from './helpers/console-harness.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

/**
 * The console's door: `/` is the console, a one-time sign-in link (as `npm run dev` prints one)
 * signs a tab in with a key kept in that tab's session storage only, a deep link survives the
 * detour through sign-in, and signing out revokes the key the link minted.
 */
describe('console sign-in', function () {
  this.timeout(120_000);
  const h = new ConsoleHarness('sign-in');
  before(async function () {
    await h.start(this);
  });
  after(async () => h.stop());

  it('serves the console at / with a strict CSP and nothing inline', async () => {
    const res = await fetch(`${h.gw.url}/`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /style-src 'self'(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);
    const html = await res.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
    assert.doesNotMatch(html, /<style|style=/, 'no inline style');
    const assets = [...html.matchAll(/<(?:link|script)[^>]*(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    assert.equal(assets.length, 3, 'icon, stylesheet, script');
    for (const asset of assets) {
      const res = await fetch(new URL(asset, `${h.gw.url}/`));
      assert.equal(res.status, 200, asset);
      assert.match(res.headers.get('cache-control') ?? '', /immutable/, `${asset} carries its hash`);
    }
  });

  it('signs in with a one-time link, keeps the key in session storage only, and the link works once', async () => {
    const link = await h.signInLink();
    const tab = await h.tab();
    await tab.page.goto(link);
    await tab.page.getByRole('link', { name: 'Runs' }).waitFor();
    assert.doesNotMatch(tab.page.url(), /code=/, 'the code left the address bar');
    assert.equal(await tab.page.getByText('Loading the console').count(), 0, 'the boot line is gone');
    const stored = (await tab.page.evaluate(`({ session: sessionStorage.getItem('switchyard.console.session'), local: localStorage.length, cookie: document.cookie })`)) as { session: string | null; local: number; cookie: string };
    const session = JSON.parse(stored.session ?? 'null') as { apiKey: string; keyId: string; accountId: string };
    assert.match(session.apiKey, /^sy_/);
    assert.equal(session.accountId, h.account.id);
    assert.equal(stored.local, 0, 'nothing in local storage');
    assert.equal(stored.cookie, '', 'no cookie');
    assert.ok(!tab.requests.some((u) => u.includes(session.apiKey)), 'the key is in no URL the page asked for');

    // The same link again, in a fresh tab: refused, and the page says so.
    const again = await h.tab();
    await again.page.goto(link);
    await again.page.getByRole('alert').filter({ hasText: /used already or expired/ }).waitFor();
    assert.equal(await again.page.evaluate('sessionStorage.length'), 0);
  });

  it('answers a wrong code with 401 in the error envelope', async () => {
    const res = await fetch(`${h.gw.url}/v1/console/sign-in`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: 'not-a-code' }) });
    assert.equal(res.status, 401);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'unauthorized');
  });

  it('lets an admin mint a link, and 404s an unknown account', async () => {
    const ok = await fetch(`${h.gw.url}/v1/admin/accounts/${h.account.id}/sign-in-links`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.equal(ok.status, 201);
    const body = (await ok.json()) as { url: string; expires_at: string };
    assert.match(body.url, new RegExp(`^${h.gw.url}/sign-in#code=[A-Za-z0-9_-]{43}$`));
    assert.ok(Date.parse(body.expires_at) > Date.now());
    const missing = await fetch(`${h.gw.url}/v1/admin/accounts/acct_nope/sign-in-links`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.equal(missing.status, 404);
  });

  it('sends a deep link through sign-in with a pasted key and back to where it pointed', async () => {
    const tab = await h.tab();
    await h.open(tab, '/account');
    await tab.page.getByLabel('API key').fill(h.account.key);
    await tab.page.getByRole('button', { name: 'Sign in' }).click();
    await tab.page.getByRole('heading', { level: 1, name: 'Account' }).waitFor();
    assert.equal(new URL(tab.page.url()).pathname, '/account');
  });

  it('refuses a wrong pasted key without keeping it', async () => {
    const tab = await h.tab();
    await h.open(tab, '/sign-in');
    await tab.page.getByLabel('API key').fill('sy_wrong');
    await tab.page.getByRole('button', { name: 'Sign in' }).click();
    await tab.page.getByRole('alert').filter({ hasText: /not valid/ }).waitFor();
    assert.equal(await tab.page.evaluate('sessionStorage.length'), 0);
  });

  it('signs out by revoking the key its link minted', async () => {
    const tab = await h.signedInTab();
    const { apiKey } = JSON.parse((await tab.page.evaluate(`sessionStorage.getItem('switchyard.console.session')`)) as string) as { apiKey: string };
    assert.equal((await fetch(`${h.gw.url}/v1/account`, { headers: { authorization: `Bearer ${apiKey}` } })).status, 200);
    await tab.page.getByRole('button', { name: 'Sign out' }).click();
    await tab.page.getByLabel('API key').waitFor();
    assert.equal(await tab.page.evaluate('sessionStorage.length'), 0);
    assert.equal((await fetch(`${h.gw.url}/v1/account`, { headers: { authorization: `Bearer ${apiKey}` } })).status, 401);
  });

  it('asked nothing of any other origin', () => h.assertSameOrigin());
});

describe('console with CONSOLE=false', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('console-off');
  let gw: TestGateway;
  before(async () => {
    gw = await new TestGateway(prefix, { CONSOLE: 'false' }).start();
  });
  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  it('answers its pages and files 404 in the error envelope', async () => {
    for (const p of ['/', '/runs/run_x', '/console/app.js', '/console/vendor/model-viewer.min.js']) {
      const res = await fetch(`${gw.url}${p}`);
      assert.equal(res.status, 404, p);
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'not_found');
    }
  });
});
