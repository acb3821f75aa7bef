import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';
import { ConsoleHarness, VIEWPORTS } from './helpers/console-harness.js';
import { until } from './helpers/harness.js';

/**
 * The console for people on a keyboard, with a screen reader, or on a phone: every page, at
 * desktop and phone widths, has no serious axe violation, nothing wider than the screen, and a
 * screenshot under the test's temp dir; the skip link and the navigation work from the keyboard,
 * and a new page's heading takes the focus.
 */
describe('console accessibility', function () {
  this.timeout(180_000);
  const h = new ConsoleHarness('a11y');
  let runId: string;
  before(async function () {
    await h.start(this);
    const res = await h.gw.submit(h.account.key, { kind: 'inference:image:generate', input: { prompt: 'a lighthouse at dusk' } });
    runId = res.body.run_id;
    await until('the image run succeeds', async () => (await h.gw.request('GET', `/v1/jobs/${runId}`, { key: h.account.key })).body.status === 'succeeded', 30_000);
  });
  after(async () => h.stop());

  const pages = () => [
    { name: 'try', path: '/', heading: 'Try a kind' },
    { name: 'kind-form', path: '/kinds/inference:image:generate', heading: /image generate/i },
    { name: 'runs', path: '/runs', heading: 'Runs' },
    { name: 'run', path: `/runs/${runId}`, heading: new RegExp(runId) },
    { name: 'account', path: '/account', heading: 'Account' },
  ];

  it('has no serious violation and nothing wider than the screen on any page, at desktop and phone widths', async () => {
    const tab = await h.signedInTab();
    const problems: string[] = [];
    for (const page of pages()) {
      for (const [width, size] of Object.entries(VIEWPORTS)) {
        await tab.page.setViewportSize(size);
        await h.open(tab, page.path);
        await tab.page.getByRole('heading', { level: 1, name: page.heading }).waitFor();
        await tab.page.waitForLoadState('networkidle');
        for (const v of await h.seriousViolations(tab.page)) problems.push(`${page.path} (${width}): ${v}`);
        const overflow = (await tab.page.evaluate('document.documentElement.scrollWidth - window.innerWidth')) as number;
        if (overflow > 0) problems.push(`${page.path} (${width}): ${overflow}px wider than the screen`);
      }
      for (const file of await h.screenshots(tab.page, page.name)) assert.ok(existsSync(file) && statSync(file).size > 1000, file);
    }
    const signedOut = await h.tab(VIEWPORTS.phone);
    await h.open(signedOut, '/sign-in');
    await signedOut.page.getByLabel('API key').waitFor();
    for (const v of await h.seriousViolations(signedOut.page)) problems.push(`/sign-in: ${v}`);
    await h.screenshots(signedOut.page, 'sign-in');
    assert.deepEqual(problems, []);
  });

  it('starts with a skip link to the content, then reaches the navigation by keyboard, and focuses the new page heading', async () => {
    const tab = await h.signedInTab();
    await h.open(tab, '/');
    await tab.page.getByRole('heading', { level: 1, name: 'Try a kind' }).waitFor();
    await tab.page.keyboard.press('Tab');
    assert.equal(await tab.page.evaluate('document.activeElement.textContent'), 'Skip to content');
    await tab.page.keyboard.press('Enter');
    assert.match(tab.page.url(), /#main$/);
    // From the top again: past the skip link and the brand, to the navigation, then follow "Runs".
    await h.open(tab, '/');
    await tab.page.getByRole('heading', { level: 1, name: 'Try a kind' }).waitFor();
    const focusedTexts: string[] = [];
    for (let i = 0; i < 6 && !focusedTexts.includes('Runs'); i++) {
      await tab.page.keyboard.press('Tab');
      focusedTexts.push((await tab.page.evaluate('document.activeElement.textContent')) as string);
    }
    assert.ok(focusedTexts.includes('Runs'), `tab order: ${focusedTexts.join(' | ')}`);
    await tab.page.keyboard.press('Enter');
    await tab.page.getByRole('heading', { level: 1, name: 'Runs' }).waitFor();
    await tab.page.waitForFunction(`document.activeElement && document.activeElement.tagName === 'H1'`);
    assert.equal(await tab.page.title(), 'Runs · Switchyard');
    const current = await tab.page.getByRole('link', { name: 'Runs' }).getAttribute('aria-current');
    assert.equal(current, 'page', 'the navigation says which page is open');
  });

  it('asked nothing of any other origin', () => h.assertSameOrigin());
});
