import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { ConsoleHarness, type ConsoleTab } from './helpers/console-harness.js';
import { until } from './helpers/harness.js';
import { LLM, PacedWorker } from './helpers/paced-worker.js';

/**
 * The console's run page (`/runs/<run_id>`) against a gateway whose only worker is the test's
 * own (PacedWorker), so a run stops mid-way exactly where the test wants it: streamed text seen
 * before the run ends, a cancel confirmed from the page, an event stream cut mid-run and
 * resumed with every log line once, a queued run's place and reason, and a finished run's
 * attempts, cost and error.
 */
describe('console run page', function () {
  this.timeout(180_000);
  const h = new ConsoleHarness('run-page', { fleet: false });
  const worker = new PacedWorker();
  let tab: ConsoleTab;

  before(async function () {
    await h.start(this);
    await worker.start(h.gw.url, await h.gw.workerToken());
    tab = await h.signedInTab();
  });
  after(async () => {
    await worker.stop();
    await h.stop();
  });

  const submit = async (input: Record<string, unknown>, kind = LLM, extra: Record<string, unknown> = {}) => {
    const res = await h.gw.submit(h.account.key, { kind, input, ...extra });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };
  const job = async (runId: string) => (await h.gw.request('GET', `/v1/jobs/${runId}`, { key: h.account.key })).body;
  const badge = (page: Page) => page.locator('.run-facts .badge');
  const statusIs = (page: Page, status: string) => page.locator('.run-facts .badge', { hasText: status }).waitFor();

  it('shows streamed LLM text while the run is still running, then the whole text', async () => {
    const runId = await submit({ prompt: 'stream' });
    await h.open(tab, `/runs/${runId}`);
    const text = tab.page.getByTestId('streamed-text');
    await text.filter({ hasText: 'Once upon a time' }).waitFor();
    // The partial text is there, and the run has not ended: the page and the API agree.
    assert.equal(await badge(tab.page).textContent(), 'running');
    assert.equal((await job(runId)).terminal, false);
    assert.doesNotMatch((await text.textContent()) ?? '', /the end/);
    await tab.page.getByText('writing').waitFor(); // the progress message
    assert.equal(await tab.page.locator('#run-progress-bar').getAttribute('value'), '25');
    assert.deepEqual(await h.seriousViolations(tab.page), []);
    await h.screenshots(tab.page, 'run-running');

    worker.open('stream-rest');
    await statusIs(tab.page, 'succeeded');
    assert.equal(await text.textContent(), 'Once upon a time the end.');
  });

  it('cancels a running run from the page after a keyboard confirmation', async () => {
    const runId = await submit({ prompt: 'hold' });
    await h.open(tab, `/runs/${runId}`);
    await tab.page.getByText('holding until canceled').waitFor();
    const cancel = tab.page.getByRole('button', { name: 'Cancel run' });
    // Escape leaves the run alone and gives the focus back to the button.
    await cancel.press('Enter');
    const dialog = tab.page.getByRole('dialog', { name: 'Cancel this run?' });
    await dialog.waitFor();
    assert.equal(await tab.page.evaluate('document.activeElement?.textContent'), 'Keep it running', 'the safe choice has the focus');
    await tab.page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    assert.equal((await job(runId)).status, 'running');
    // Enter, Tab to "Yes, cancel it", Enter.
    await cancel.press('Enter');
    await dialog.waitFor();
    await tab.page.keyboard.press('Tab');
    assert.equal(await tab.page.evaluate('document.activeElement?.textContent'), 'Yes, cancel it');
    await tab.page.keyboard.press('Enter');
    await statusIs(tab.page, 'canceled');
    await tab.page.locator('.run-error .error-code', { hasText: 'canceled' }).waitFor();
    assert.equal(await cancel.count(), 0, 'no cancel button on a canceled run');
    const after = await until('the run is canceled', async () => ((await job(runId)).status === 'canceled' ? job(runId) : null));
    assert.equal(after.error.code, 'canceled');
  });

  it("stays at canceled when the cancel's answer (running, stop asked) arrives after the run's end", async () => {
    const runId = await submit({ prompt: 'hold' });
    await h.open(tab, `/runs/${runId}`);
    await tab.page.getByText('holding until canceled').waitFor();
    // The gateway answers the cancel while the worker is still stopping; the page gets that
    // answer only once the run has ended and the stream said so, as a slow network can order them.
    let answered!: () => void;
    const late = new Promise<void>((resolve) => (answered = resolve));
    await tab.page.route(`**/v1/jobs/${runId}/cancel`, async (route) => {
      const response = await route.fetch();
      assert.equal((await response.json()).status, 'running');
      await until('the run is canceled', async () => (await job(runId)).status === 'canceled');
      await statusIs(tab.page, 'canceled');
      await route.fulfill({ response });
      answered();
    });
    await tab.page.getByRole('button', { name: 'Cancel run' }).click();
    await tab.page.getByRole('button', { name: 'Yes, cancel it' }).click();
    await late;
    await tab.page.getByRole('dialog', { name: 'Cancel this run?' }).waitFor({ state: 'hidden' });
    assert.equal(await badge(tab.page).textContent(), 'canceled');
    await tab.page.unroute(`**/v1/jobs/${runId}/cancel`);
  });

  it('resumes after the network drops mid-run with every log line shown once, in order', async () => {
    const runId = await submit({ prompt: 'lines' });
    const drop = await h.tab();
    // The page's event streams, cut on demand as a lost connection cuts them (the read fails);
    // an init script is not the page's, so the CSP does not apply to it.
    await drop.context.addInitScript(CUTTABLE_EVENT_STREAMS);
    await drop.page.goto(await h.signInLink());
    await drop.page.getByRole('link', { name: 'Runs' }).waitFor();
    await h.open(drop, `/runs/${runId}`);
    await drop.page.getByText('line 5', { exact: true }).waitFor();

    // The network goes: the open stream breaks, and every reconnect is refused until it is back.
    const eventsUrl = `**/v1/jobs/${runId}/events*`;
    await drop.context.route(eventsUrl, (route) => route.abort('internetdisconnected'));
    assert.ok(((await drop.page.evaluate('globalThis.__cutEventStreams()')) as number) >= 1, 'a stream was open');
    await drop.page.locator('[data-connection="reconnecting"]').filter({ hasText: 'reconnecting…' }).waitFor();
    // Lines 6..10 are logged while the page is away.
    worker.open('lines-more');
    await until('line 10 is logged', async () => {
      const res = await fetch(`${h.gw.url}/v1/jobs/${runId}/events`, { headers: { authorization: `Bearer ${h.account.key}`, 'last-event-id': '0' }, signal: AbortSignal.timeout(1000) }).catch(() => null);
      const text = res ? await readFor(res, 500) : '';
      return text.includes('line 10');
    });
    assert.equal(await drop.page.getByText('line 6', { exact: true }).count(), 0, 'nothing came through while offline');

    await drop.context.unroute(eventsUrl);
    await drop.page.getByText('line 10', { exact: true }).waitFor();
    worker.open('lines-end');
    await statusIs(drop.page, 'succeeded');
    const lines = await drop.page.locator('.run-log .log-line').allTextContents();
    assert.deepEqual(lines, Array.from({ length: 15 }, (_, i) => `line ${i + 1}`));
    assert.equal(await drop.page.locator('[data-connection="ended"]').count(), 1);
  });

  it("shows a queued run's place in the queue and why it waits, in words", async () => {
    const runId = await submit({ prompt: 'a lighthouse' }, 'inference:image:generate');
    const queued = await job(runId);
    assert.equal(queued.waiting_reason, 'no_worker_for_kind');
    await h.open(tab, `/runs/${runId}`);
    const note = tab.page.locator('.queue-note');
    await note.filter({ hasText: `position ${queued.queue_position} in line` }).or(note.filter({ hasText: 'next in line' })).waitFor();
    await note.filter({ hasText: 'No connected worker serves this kind at the open tier' }).waitFor();
    await note.locator('code', { hasText: 'no_worker_for_kind' }).waitFor();
    // Connected, though the run's log is still empty.
    await tab.page.locator('[data-connection="live"]').waitFor();
    assert.deepEqual(await h.seriousViolations(tab.page), []);
    await h.screenshots(tab.page, 'run-queued');
    await h.gw.request('POST', `/v1/jobs/${runId}/cancel`, { key: h.account.key });
  });

  it('shows what the run was asked, and "Run again" opens the form filled so that Run makes a job with the same input', async () => {
    const input = { prompt: 'hello\nin two lines', max_tokens: 64, temperature: 0.5, tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }] };
    const runId = await submit(input, LLM, { class: 'interactive' });
    await h.open(tab, `/runs/${runId}`);
    const section = tab.page.locator('section[aria-labelledby="run-input-heading"]');
    await section.getByRole('heading', { name: 'Input' }).waitFor();
    // The prompt first, as the text it is (its line break kept), then each other field.
    assert.equal(await section.locator('[data-input-field="prompt"] p').textContent(), input.prompt);
    assert.equal(await section.locator('[data-input-field="prompt"] p').evaluate((el) => (globalThis as any).getComputedStyle(el).whiteSpace), 'pre-wrap');
    const dd = (field: string) => section.locator(`[data-input-field="${field}"] dd`).textContent();
    assert.equal(await dd('max_tokens'), '64');
    assert.equal(await dd('temperature'), '0.5');
    assert.deepEqual(JSON.parse((await dd('tools')) ?? ''), input.tools);
    assert.equal(await section.locator('[data-input-field="tools"] pre').count(), 1, 'arrays are shown as indented JSON');
    await statusIs(tab.page, 'succeeded');
    assert.deepEqual(await h.seriousViolations(tab.page), []);
    await h.screenshots(tab.page, 'run-input');

    await section.getByRole('link', { name: 'Run again' }).click();
    await tab.page.getByRole('heading', { name: 'Input', level: 2 }).waitFor();
    assert.match(tab.page.url(), new RegExp(`/kinds/${LLM}\\?`));
    const field = (name: string) => tab.page.locator(`#field-${name}`);
    assert.equal(await field('prompt').inputValue(), input.prompt);
    assert.equal(await field('max_tokens').inputValue(), '64');
    assert.equal(await field('temperature').inputValue(), '0.5');
    assert.deepEqual(JSON.parse(await field('tools').inputValue()), input.tools);
    assert.equal(await tab.page.locator('#job-class').inputValue(), 'interactive');
    assert.equal(await tab.page.locator('#job-confidentiality').inputValue(), 'open');
    await tab.page.getByRole('button', { name: 'Run', exact: true }).click();
    await tab.page.waitForURL((url) => /\/runs\/run_/.test(url.pathname) && !url.pathname.endsWith(runId));
    const again = tab.page.url().split('/runs/')[1];
    const copy = (await h.gw.request('GET', `/v1/jobs/${again}?include=input`, { key: h.account.key })).body;
    assert.deepEqual(copy.input, input, 'the same input, numbers as numbers and the array as an array');
    assert.equal(copy.class, 'interactive');
    assert.equal(copy.confidentiality, 'open');
    assert.equal(copy.kind, LLM);

    // A field the form does not have goes back only as text: the page says which it cannot carry.
    const extra = await submit({ prompt: 'hello', style: { tone: 'dry' }, note: 'kept' });
    await h.open(tab, `/runs/${extra}`);
    await section.getByText('The form cannot carry style as it was').waitFor();
    const link = new URL((await section.getByRole('link', { name: 'Run again' }).getAttribute('href'))!, h.gw.url);
    assert.equal(link.searchParams.get('note'), 'kept');
    assert.equal(link.searchParams.has('style'), false);
    h.assertSameOrigin();
  });

  it("shows a succeeded run's attempts, cost and usage, and a failed run's error code", async () => {
    const ok = await submit({ prompt: 'hello' });
    const done = await until('the run succeeds', async () => ((await job(ok)).status === 'succeeded' ? job(ok) : null));
    await h.open(tab, `/runs/${ok}`);
    await statusIs(tab.page, 'succeeded');
    const attempt = tab.page.locator('table.attempts tbody tr');
    await attempt.first().waitFor();
    assert.equal(await attempt.count(), 1);
    const cells = await attempt.first().locator('th, td').allTextContents();
    assert.equal(cells[0], '1');
    assert.equal(cells[1], done.attempt_history[0].worker);
    assert.equal(cells[2], 'open');
    assert.equal(cells[5], 'ok');
    const cost = tab.page.locator('section[aria-labelledby="cost-heading"]');
    const credits = (n: number) => `${n} credit${n === 1 ? '' : 's'}`;
    assert.match((await cost.locator('.cost-reserved').textContent()) ?? '', new RegExp(`^${credits(done.cost.reserved)} `));
    assert.equal(await cost.locator('.cost-charged').textContent(), credits(done.cost.charged));
    await cost.getByText('Output tokens').waitFor();
    await cost.locator('dd', { hasText: String(done.usage.output_tokens) }).first().waitFor();
    await tab.page.getByText('answered at once').waitFor(); // a finished run's log comes from the replayed event log
    assert.equal(await tab.page.getByTestId('streamed-text').textContent(), 'Hi there');
    assert.deepEqual(await h.seriousViolations(tab.page), []);
    await h.screenshots(tab.page, 'run-succeeded');

    const failed = await submit({ prompt: 'fail' }, LLM, { max_attempts: 1 });
    await h.open(tab, `/runs/${failed}`);
    await statusIs(tab.page, 'failed');
    const error = tab.page.locator('.run-error');
    await error.locator('.error-code', { hasText: 'invalid_input' }).waitFor();
    await error.getByText('the prompt asks for the impossible').waitFor();
    await tab.page.locator('table.attempts td', { hasText: 'invalid_input' }).waitFor();
    h.assertSameOrigin();
  });
});

/** Reads a streamed response for up to `ms`, then lets it go. */
async function readFor(res: Response, ms: number): Promise<string> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const stop = setTimeout(() => void reader.cancel().catch(() => undefined), ms);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    // canceled: what came is enough
  } finally {
    clearTimeout(stop);
  }
  return text;
}

/**
 * Wraps the page's fetch so each event stream's body can be broken with
 * `__cutEventStreams()`: the reader then fails as on a dropped connection, and the real
 * connection is closed. Chromium's offline mode only stops new requests, not an open stream.
 */
const CUTTABLE_EVENT_STREAMS = `(() => {
  const realFetch = globalThis.fetch.bind(globalThis);
  const open = new Set();
  globalThis.__cutEventStreams = () => {
    const n = open.size;
    for (const s of open) s.cut();
    open.clear();
    return n;
  };
  globalThis.fetch = async (input, init) => {
    const res = await realFetch(input, init);
    const url = typeof input === 'string' ? input : input.url;
    if (!/\\/events(\\?|$)/.test(url) || !res.body) return res;
    const reader = res.body.getReader();
    let controller;
    const entry = {
      cut() {
        try { controller.error(new TypeError('network error')); } catch {}
        reader.cancel().catch(() => {});
      },
    };
    const body = new ReadableStream({
      start(c) { controller = c; open.add(entry); },
      async pull(c) {
        try {
          const { done, value } = await reader.read();
          if (done) { open.delete(entry); c.close(); } else c.enqueue(value);
        } catch (e) {
          open.delete(entry);
          try { c.error(e); } catch {}
        }
      },
      cancel(reason) { open.delete(entry); return reader.cancel(reason); },
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
})();`;
