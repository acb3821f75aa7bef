import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { SwitchyardClient } from '../sdk/client/index.js';
import { ConsoleHarness, type ConsoleTab } from './helpers/console-harness.js';
import { ADMIN_TOKEN } from './helpers/harness.js';

/**
 * The account page: credits as GET /v1/account has them, keys created (the secret shown once)
 * and revoked, a worker token whose command really connects a worker, files against the quota,
 * downloaded with the key and deleted, tools and bots with their chat page.
 */
describe('console account page', function () {
  this.timeout(180_000);
  // The tool is registered, never called: its endpoint need only pass the SSRF guard's checks.
  const h = new ConsoleHarness('account', { env: { OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32', OUTBOUND_ALLOWED_PORTS: '8443' } });
  let sy: SwitchyardClient;
  let tab: ConsoleTab;
  const status = async (key: string) => (await fetch(`${h.gw.url}/v1/account`, { headers: { authorization: `Bearer ${key}` } })).status;
  const html = (page: Page) => page.content();
  const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
  const sessionKey = async (page: Page) => (JSON.parse((await page.evaluate(`sessionStorage.getItem('switchyard.console.session')`)) as string) as { apiKey: string }).apiKey;

  before(async function () {
    await h.start(this);
    sy = new SwitchyardClient({ baseUrl: h.gw.url, apiKey: h.account.key });
    await sy.files.upload(new TextEncoder().encode('first notes\n'), { filename: 'first.txt', contentType: 'text/plain' });
    await sy.files.upload(new Uint8Array(3000).fill(65), { filename: 'second.txt', contentType: 'text/plain' });
    await sy.createTool({
      name: 'weather',
      description: 'Looks up the weather of a city',
      kind: 'http',
      method: 'POST',
      url: 'https://127.0.0.1:8443/weather',
      inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    });
    await sy.createBot({ name: 'Shop helper', model: 'default', systemPrompt: 'You help shoppers.', tools: [], greeting: 'Hi!', allowedOrigins: [] });
    const budget = await fetch(`${h.gw.url}/v1/admin/accounts/${h.account.id}/budget`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ budget: 5000 }),
    });
    assert.equal(budget.status, 200);
    tab = await h.signedInTab();
  });
  after(async () => h.stop());

  async function openAccount(t: ConsoleTab = tab): Promise<void> {
    await h.open(t, '/account');
    await t.page.locator('[data-credits="available"]').waitFor();
  }

  it('shows the credits GET /v1/account answers, and the monthly budget', async () => {
    await sy.submit({ kind: 'inference:image:generate', input: { prompt: 'spend a little' } }, { wait: 30 });
    await openAccount();
    const account = (await (await fetch(`${h.gw.url}/v1/account`, { headers: { authorization: `Bearer ${h.account.key}` } })).json()) as { credits: number; reserved: number; budget: { monthly: number; spent: number } };
    const digits = async (which: string) => Number((await tab.page.locator(`[data-credits="${which}"]`).innerText()).replace(/\D/g, ''));
    assert.ok(account.credits < 10_000, 'the run was charged');
    assert.equal(await digits('available'), account.credits);
    assert.equal(await digits('reserved'), account.reserved);
    assert.match(await tab.page.locator('[data-credits="budget"]').innerText(), new RegExp(`${account.budget.spent}\\D.*5,000`));
  });

  it('shows a new key once: it works, and is nowhere on the page after it is hidden or reloaded', async () => {
    await openAccount();
    await tab.page.getByLabel('Key name').fill('ci-key');
    await tab.page.getByRole('button', { name: 'Create key' }).click();
    const secret = await tab.page.locator('[data-secret]').innerText();
    assert.match(secret, /^sy_/);
    await tab.page.getByText('This is the only time it is shown', { exact: false }).waitFor();
    assert.equal(await status(secret), 200, 'the key shown works against the API');
    await tab.page.locator('tr', { hasText: 'ci-key' }).waitFor();

    await tab.page.getByRole('button', { name: 'I have copied it: hide it' }).click();
    await tab.page.locator('[data-secret]').waitFor({ state: 'detached' });
    assert.ok(!(await html(tab.page)).includes(secret), 'gone once hidden');
    await tab.page.reload();
    await tab.page.locator('tr', { hasText: 'ci-key' }).waitFor();
    assert.ok(!(await html(tab.page)).includes(secret), 'gone after a reload');
    assert.ok(!(await tab.page.evaluate('JSON.stringify(sessionStorage) + JSON.stringify(localStorage)') as string).includes(secret), 'kept in no storage');

    // Leaving the page forgets a key not hidden yet.
    await tab.page.getByLabel('Key name').fill('left-behind');
    await tab.page.getByRole('button', { name: 'Create key' }).click();
    const other = await tab.page.locator('[data-secret]').innerText();
    await tab.page.getByRole('link', { name: 'Runs' }).click();
    await tab.page.getByRole('heading', { level: 1, name: 'Runs' }).waitFor();
    await tab.page.getByRole('link', { name: 'Account' }).click();
    await tab.page.locator('tr', { hasText: 'left-behind' }).waitFor();
    assert.equal(await tab.page.locator('[data-secret]').count(), 0);
    assert.ok(!(await html(tab.page)).includes(other), 'gone after leaving the page');
  });

  it('revokes a key from the keyboard after a confirmation that Escape cancels', async () => {
    const created = await (await fetch(`${h.gw.url}/v1/account/keys`, { method: 'POST', headers: { authorization: `Bearer ${h.account.key}`, 'content-type': 'application/json' }, body: '{"name":"doomed"}' })).json() as { key: string };
    await openAccount();
    const revoke = tab.page.getByRole('button', { name: 'Revoke doomed' });
    await revoke.focus();
    await tab.page.keyboard.press('Enter');
    const dialog = tab.page.getByRole('dialog', { name: 'Revoke this key?' });
    await dialog.waitFor();
    assert.equal(await tab.page.evaluate('document.activeElement.textContent'), 'Cancel', 'the safe answer has the focus');
    await tab.page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    assert.equal(await status(created.key), 200, 'Escape revoked nothing');

    await revoke.focus();
    await tab.page.keyboard.press('Enter');
    await dialog.waitFor();
    await tab.page.keyboard.press('Tab');
    assert.equal(await tab.page.evaluate('document.activeElement.textContent'), 'Revoke key');
    await tab.page.keyboard.press('Enter');
    await tab.page.locator('tr', { hasText: 'doomed' }).filter({ hasText: 'revoked' }).waitFor();
    assert.equal(await status(created.key), 401, 'the API refuses it now');
  });

  it('warns that revoking the key of this tab signs it out, and does', async () => {
    const own = await h.signedInTab();
    await openAccount(own);
    const { apiKey } = JSON.parse((await own.page.evaluate(`sessionStorage.getItem('switchyard.console.session')`)) as string) as { apiKey: string };
    const row = own.page.locator('tr', { hasText: 'this tab' });
    await row.getByRole('button', { name: /^Revoke/ }).click();
    await own.page.getByRole('dialog').getByText('revoking it signs you out').waitFor();
    await own.page.getByRole('button', { name: 'Revoke key' }).click();
    await own.page.getByRole('heading', { name: 'Sign in to Switchyard' }).waitFor();
    assert.equal(await own.page.evaluate('sessionStorage.length'), 0, (await own.page.evaluate('JSON.stringify(sessionStorage)')) as string);
    assert.equal(await status(apiKey), 401);
  });

  it('mints a worker token shown with a switchyard worker command that connects', async () => {
    await openAccount();
    await tab.page.getByRole('button', { name: 'Mint a worker token' }).click();
    const token = await tab.page.locator('[data-secret]').innerText();
    assert.match(token, /^swt_/);
    await tab.page.getByLabel('Kinds').selectOption('inference:image:generate');
    const command = await tab.page.locator('[data-worker-command]').innerText();
    assert.equal(command, `npx switchyard worker --gateway ${h.gw.url} --token ${token} --engine demo --kinds inference:image:generate`);
    const python = await tab.page.locator('[data-python-worker]').innerText();
    assert.ok(python.includes(`Worker(gateway="${h.gw.url}", token="${token}")`), python);

    // The command as shown, with the CLI of this checkout for `npx switchyard`.
    const args = command.split(' ').slice(2);
    const worker = spawn(process.execPath, ['api/bin/switchyard.mjs', ...args], { env: { ...process.env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const exited = new Promise<number | null>((resolve) => worker.on('exit', resolve));
    try {
      await new Promise<void>((resolve, reject) => {
        const seen = (b: Buffer) => {
          out += b.toString();
          if (/registered/.test(out)) resolve();
        };
        worker.stdout.on('data', seen);
        worker.stderr.on('data', seen);
        void exited.then((code) => reject(new Error(`the worker exited ${code} before registering:\n${out}`)));
      });
    } finally {
      worker.kill('SIGTERM');
      await exited;
    }

    await tab.page.getByRole('button', { name: 'I have copied it: hide it' }).click();
    assert.ok(!(await html(tab.page)).includes(token), 'the token is gone once hidden');
  });

  it('lists files with their sizes against the quota, and deletes one as the API agrees', async () => {
    await openAccount();
    const before = await sy.files.list();
    assert.equal(before.data.length, 2);
    const second = before.data.find((f) => f.filename === 'second.txt')!;
    await tab.page.locator(`tr[data-file-id="${second.id}"]`).waitFor();
    assert.equal(await tab.page.locator(`tr[data-file-id="${second.id}"] [data-size]`).innerText(), '2.9 KB');
    assert.deepEqual(before.quota, { used_bytes: 12 + 3000, quota_bytes: 1024 ** 3 });
    assert.equal(await tab.page.locator('[data-quota]').innerText(), '2.9 KB of 1.0 GB');
    assert.equal(await tab.page.locator('#files-quota').getAttribute('value'), String(before.quota!.used_bytes));

    await tab.page.getByRole('button', { name: 'Delete second.txt' }).click();
    await tab.page.getByRole('dialog', { name: 'Delete this file?' }).getByRole('button', { name: 'Delete file' }).click();
    await tab.page.locator(`tr[data-file-id="${second.id}"]`).waitFor({ state: 'detached' });
    const after = await sy.files.list();
    assert.deepEqual(after.data.map((f) => f.filename), ['first.txt']);
    await tab.page.waitForFunction((used) => (globalThis as any).document.querySelector('#files-quota').getAttribute('value') === used, String(after.quota!.used_bytes));
  });

  it('downloads a file with the key: busy while its bytes arrive, saved under its name with the uploaded bytes, the blob URL let go', async () => {
    // Bytes with no format's signature, larger than one chunk of the body.
    const bytes = Uint8Array.from({ length: 300_000 }, (_, i) => (i * 7 + (i >> 9)) % 251);
    const file = await sy.files.upload(bytes, { filename: 'bytes.bin', contentType: 'application/octet-stream' });
    try {
      await openAccount();
      const row = tab.page.locator(`tr[data-file-id="${file.id}"]`);
      await row.waitFor();
      // The content's answer waits until the busy state is checked: no sleeps, no race.
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let authorization: string | undefined;
      await tab.page.route(`**/v1/files/${file.id}/content`, async (route) => {
        authorization = route.request().headers().authorization;
        await held;
        await route.continue();
      });
      // Which blob URLs the page makes, to see them revoked after.
      await tab.page.evaluate(`(() => { const made = (globalThis.blobUrls = []); const create = URL.createObjectURL.bind(URL);
        URL.createObjectURL = (blob) => { const url = create(blob); made.push(url); return url; }; })()`);

      const downloading = tab.page.waitForEvent('download');
      // Named "Download bytes.bin", then "Downloading… bytes.bin" while busy.
      const button = row.getByRole('button', { name: /^Download(ing…)? bytes\.bin$/ });
      await button.focus();
      await tab.page.keyboard.press('Enter');
      await row.getByRole('progressbar', { name: 'Downloading bytes.bin' }).waitFor();
      assert.equal(await button.getAttribute('aria-disabled'), 'true');
      assert.equal(await button.innerText(), 'Downloading…');
      assert.equal(await button.getAttribute('aria-label'), 'Downloading… bytes.bin');
      assert.equal(await tab.page.locator('#files-title ~ [role="status"]').innerText(), 'Downloading bytes.bin…');
      assert.deepEqual(await h.seriousViolations(tab.page), []);
      await h.screenshots(tab.page, 'account-file-downloading');
      release();

      const download = await downloading;
      assert.equal(download.suggestedFilename(), 'bytes.bin');
      const saved = await readFile((await download.path())!);
      assert.equal(sha256(saved), sha256(bytes), 'the saved bytes are the uploaded ones');
      assert.equal(sha256(saved), file.sha256);
      assert.equal(authorization, `Bearer ${await sessionKey(tab.page)}`, "the bytes were asked for with the session's key");
      await tab.page.locator('#files-title ~ [role="status"]', { hasText: 'bytes.bin downloaded.' }).waitFor();
      await row.getByRole('button', { name: 'Download bytes.bin', exact: true }).waitFor();
      assert.equal(await button.getAttribute('aria-disabled'), null);
      assert.equal(await row.getByRole('progressbar').count(), 0);
      assert.equal(await tab.page.locator('a[download]').count(), 0, 'the temporary link is gone');
      assert.equal(new URL(tab.page.url()).pathname, '/account', 'the page stayed');
      const made = (await tab.page.evaluate('globalThis.blobUrls')) as string[];
      assert.equal(made.length, 1);
      // Polled with a synchronous request: waitForFunction takes a returned promise as truthy.
      await tab.page.waitForFunction((url) => {
        const xhr = new (globalThis as any).XMLHttpRequest();
        xhr.open('GET', url, false);
        try {
          xhr.send();
          return false;
        } catch {
          return true; // a revoked blob URL is a network error
        }
      }, made[0]);
    } finally {
      await tab.page.unroute(`**/v1/files/${file.id}/content`);
      await sy.files.delete(file.id).catch(() => undefined);
    }
  });

  it('says in an alert why a download failed, and keeps the list usable', async () => {
    const file = await sy.files.upload(new TextEncoder().encode('soon gone\n'), { filename: 'gone.txt', contentType: 'text/plain' });
    await openAccount();
    const row = tab.page.locator(`tr[data-file-id="${file.id}"]`);
    await row.waitFor();
    await sy.files.delete(file.id); // deleted elsewhere while the page shows it
    await row.getByRole('button', { name: 'Download gone.txt' }).click();
    const alert = tab.page.getByRole('alert').filter({ hasText: 'Could not download gone.txt' });
    await alert.waitFor();
    assert.match(await alert.innerText(), /not_found/);
    await row.getByRole('button', { name: 'Download gone.txt', exact: true }).waitFor();
    assert.equal(await tab.page.getByRole('heading', { name: 'Sign in to Switchyard' }).count(), 0, 'a 404 keeps the session');
  });

  it('lists tools and bots, and a bot opens its chat page', async () => {
    await openAccount();
    const tool = tab.page.locator('tr', { hasText: 'weather' });
    await tool.waitFor();
    assert.match(await tool.innerText(), /http\s+POST https:\/\/127\.0\.0\.1:8443\/weather/);
    const bot = tab.page.locator('[data-bot-id]', { hasText: 'Shop helper' });
    await bot.waitFor();
    const link = bot.getByRole('link', { name: /Open the chat page of Shop helper/ });
    const href = (await link.getAttribute('href'))!;
    assert.ok(href.startsWith(`${h.origin}/v1/bots/`), href);
    const [popup] = await Promise.all([tab.page.waitForEvent('popup'), link.click()]);
    await popup.waitForLoadState();
    assert.equal(popup.url(), href);
    assert.equal((await tab.context.request.get(href)).status(), 200);
    await popup.close();
  });

  it('says so when the account has no files, tools or bots yet', async () => {
    const empty = await h.gw.account(100, 'empty');
    const t = await h.tab();
    await h.open(t, '/account');
    await t.page.getByLabel('API key').fill(empty.key);
    await t.page.getByRole('button', { name: 'Sign in' }).click();
    await t.page.locator('[data-credits="available"]').waitFor();
    for (const what of ['No files.', 'No tools.', 'No bots.']) await t.page.getByText(what, { exact: false }).waitFor();
    assert.equal(await t.page.locator('[data-credits="budget"]').innerText(), 'none set');
  });

  it('passes axe and is screenshotted with a secret and a dialog shown', async () => {
    await openAccount();
    await tab.page.getByRole('button', { name: 'Mint a worker token' }).click();
    await tab.page.locator('[data-worker-command]').waitFor();
    assert.deepEqual(await h.seriousViolations(tab.page), []);
    await h.screenshots(tab.page, 'account');
    await tab.page.setViewportSize({ width: 390, height: 844 });
    // Wide tables scroll inside their own box; the page itself never scrolls sideways.
    assert.ok((await tab.page.evaluate('document.documentElement.scrollWidth - window.innerWidth')) as number <= 0, 'nothing wider than a phone');
    await tab.page.getByRole('button', { name: /^Delete/ }).first().click();
    await tab.page.getByRole('dialog').waitFor();
    assert.deepEqual(await h.seriousViolations(tab.page), []);
    await tab.page.screenshot({ path: path.join(h.outDir, 'account-dialog-phone.png') });
  });

  it('asked nothing of any other origin', () => h.assertSameOrigin());
});
