import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { SwitchyardClient, type JobStatus } from '../sdk/client/index.js';
import { ConsoleHarness, VIEWPORTS, type ConsoleTab } from './helpers/console-harness.js';

const IMAGE = 'inference:image:generate';
const LLM = 'inference:llm:text-generate';

/**
 * The runs list: the account's runs newest first, as GET /v1/jobs answers them, filtered by
 * kind and status, paged forward and back, each row opening its run, and every view a URL.
 */
describe('console runs list', function () {
  this.timeout(180_000);
  const h = new ConsoleHarness('runs');
  let sy: SwitchyardClient;
  /** Our runs, oldest first. */
  const made: Array<{ id: string; kind: string }> = [];
  let tab: ConsoleTab;

  before(async function () {
    await h.start(this);
    sy = new SwitchyardClient({ baseUrl: h.gw.url, apiKey: h.account.key });
    for (let i = 0; i < 25; i++) {
      const kind = i % 2 === 0 ? IMAGE : LLM;
      const job = await sy.submit({ kind, input: { prompt: `run ${i}` } });
      made.push({ id: job.run_id, kind });
      // Some canceled: at once while queued, or stopped by the worker while running.
      if (i % 4 === 1) await sy.cancel(job.run_id).catch(() => undefined);
    }
    // Statuses settle before the page and the API are compared.
    await Promise.all(made.map((m) => sy.wait(m.id, { timeoutMs: 60_000, intervalMs: 100 })));
    tab = await h.signedInTab();
  });
  after(async () => h.stop());

  /** The ids of the API's answer for a filter, page by page as the console asks (20 a page). */
  async function apiPages(filter: { kind?: string; status?: JobStatus } = {}): Promise<string[][]> {
    const pages: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = await sy.list({ ...filter, limit: 20, cursor });
      pages.push(page.data.map((j) => j.run_id));
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    return pages;
  }

  /** The run ids the page shows once the view `consolePath` has loaded. */
  async function rowsOf(page: Page, consolePath: string): Promise<string[]> {
    await page.locator(`.runs-results[aria-busy="false"][data-view="${consolePath}"]`).waitFor();
    return page.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => (tr as unknown as { dataset: { runId: string } }).dataset.runId));
  }

  const consolePathOf = (page: Page) => {
    const u = new URL(page.url());
    return u.pathname + u.search;
  };

  it('lists the account\'s runs newest first, as the API does', async () => {
    await h.open(tab, '/runs');
    const rows = await rowsOf(tab.page, '/runs');
    const newestFirst = made.map((m) => m.id).reverse();
    assert.deepEqual(rows, newestFirst.slice(0, 20));
    assert.deepEqual(rows, (await apiPages())[0]);
    // Each row tells its kind and status as the run has them.
    const first = await sy.get(rows[0]);
    const row = tab.page.locator(`tr[data-run-id="${rows[0]}"]`);
    assert.equal(await row.locator('td[data-label="Kind"]').innerText(), first.kind);
    assert.equal((await row.locator('td[data-label="Status"]').innerText()).trim(), first.status);
  });

  it('pages forward and back with no run missed or shown twice', async () => {
    await h.open(tab, '/runs');
    const first = await rowsOf(tab.page, '/runs');
    await tab.page.getByRole('link', { name: /Next/ }).click();
    await tab.page.waitForURL(/cursors=/);
    const second = await rowsOf(tab.page, consolePathOf(tab.page));
    assert.deepEqual([...first, ...second], made.map((m) => m.id).reverse(), 'every run once, newest first');
    assert.equal(await tab.page.getByRole('link', { name: /Next/ }).count(), 0, 'no page after the last');
    await tab.page.getByRole('link', { name: /Previous/ }).click();
    assert.deepEqual(await rowsOf(tab.page, '/runs'), first);
    // Browser Back returns to page 2, as the URL held it.
    await tab.page.goBack();
    await tab.page.waitForURL(/cursors=/);
    assert.deepEqual(await rowsOf(tab.page, consolePathOf(tab.page)), second);
  });

  it('filters by kind and by status, the URL saying so and the rows as the API answers them', async () => {
    await h.open(tab, '/runs');
    await rowsOf(tab.page, '/runs');
    await tab.page.getByLabel('Kind').selectOption(LLM);
    await tab.page.waitForURL((u) => u.searchParams.get('kind') === LLM);
    const llmRows = await rowsOf(tab.page, consolePathOf(tab.page));
    const [llmApi] = await apiPages({ kind: LLM });
    assert.deepEqual(llmRows, llmApi);
    assert.deepEqual(llmRows, made.filter((m) => m.kind === LLM).map((m) => m.id).reverse());

    await tab.page.getByLabel('Status').selectOption('canceled');
    await tab.page.waitForURL((u) => u.searchParams.get('status') === 'canceled' && u.searchParams.get('kind') === LLM);
    const canceledRows = await rowsOf(tab.page, consolePathOf(tab.page));
    const [canceledApi] = await apiPages({ kind: LLM, status: 'canceled' });
    assert.ok(canceledApi.length > 0, 'some llm runs were canceled');
    assert.deepEqual(canceledRows, canceledApi);
    for (const status of await tab.page.locator('td[data-label="Status"]').allInnerTexts()) assert.equal(status.trim(), 'canceled');
  });

  it('renders a filtered view straight from a deep link', async () => {
    const deep = await h.tab();
    await deep.page.goto(await h.signInLink());
    await deep.page.getByRole('link', { name: 'Runs' }).waitFor();
    const link = `/runs?kind=${encodeURIComponent(IMAGE)}&status=succeeded`;
    await h.open(deep, link);
    const rows = await rowsOf(deep.page, link);
    const [api] = await apiPages({ kind: IMAGE, status: 'succeeded' });
    assert.ok(api.length > 0);
    assert.deepEqual(rows, api);
    assert.equal(await deep.page.getByLabel('Kind').inputValue(), IMAGE);
    assert.equal(await deep.page.getByLabel('Status').inputValue(), 'succeeded');
    // Reload keeps the view.
    await deep.page.reload();
    assert.deepEqual(await rowsOf(deep.page, link), api);
  });

  it('opens a run from its row', async () => {
    await h.open(tab, '/runs');
    const [id] = await rowsOf(tab.page, '/runs');
    await tab.page.getByRole('link', { name: id, exact: true }).click();
    await tab.page.getByRole('heading', { level: 1, name: `Run ${id}` }).waitFor();
    assert.equal(new URL(tab.page.url()).pathname, `/runs/${id}`);
  });

  it('says when nothing matches, with a way to start a run', async () => {
    await h.open(tab, '/runs?status=running');
    await rowsOf(tab.page, '/runs?status=running');
    await tab.page.getByText('No runs match these filters.').waitFor();
    assert.equal(await tab.page.getByRole('link', { name: 'try a kind' }).getAttribute('href'), '/');
  });

  it('stacks each run into a readable card at phone width, and passes axe', async () => {
    const phone = await h.signedInTab(VIEWPORTS.phone);
    await h.open(phone, '/runs');
    await rowsOf(phone.page, '/runs');
    const layout = (await phone.page.evaluate(`(() => {
      const tr = document.querySelector('tbody tr');
      const cell = tr.querySelector('td[data-label="Kind"]');
      return { row: getComputedStyle(tr).display, label: getComputedStyle(cell, '::before').content, overflow: document.documentElement.scrollWidth - window.innerWidth };
    })()`)) as { row: string; label: string; overflow: number };
    assert.equal(layout.row, 'block', 'a run is a card, not a table row');
    assert.equal(layout.label, '"Kind"', 'each value under its name');
    assert.ok(layout.overflow <= 0, `nothing wider than the phone (${layout.overflow}px over)`);
    assert.deepEqual(await h.seriousViolations(phone.page), []);
    await h.open(tab, '/runs');
    await rowsOf(tab.page, '/runs');
    assert.deepEqual(await h.seriousViolations(tab.page), []);
    await h.screenshots(tab.page, 'runs');
  });

  it('asked nothing of any other origin', () => h.assertSameOrigin());
});
