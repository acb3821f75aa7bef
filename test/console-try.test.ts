import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { SwitchyardClient } from '../sdk/client/index.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { ConsoleHarness, VIEWPORTS, meshDrawn } from './helpers/console-harness.js';
import { ADMIN_TOKEN } from './helpers/harness.js';
import { CURL, GO, PYTHON3, requireProgram } from './helpers/optional-program.js';
import { samplePng } from './helpers/sample-files.js';

const run = promisify(execFile);
/** How often the kinds list asks again (REFRESH_MS of api/console/try/use-kinds.ts, a browser module). */
const REFRESH_MS = 3000;

/**
 * Try a kind (docs/console.md): `/` lists the live kinds with their workers, prices and whether
 * they wait for workers; `/kinds/<kind>` is a form made from the kind's input schema whose file
 * fields take a dropped or picked file (uploaded through /v1/files) or a previous run's file,
 * prefilled from the query string, showing the gateway's 400 next to its field, and the same
 * request as curl / TypeScript / Python / Go that really makes the same job.
 */
describe('console try a kind', function () {
  this.timeout(180_000);
  const h = new ConsoleHarness('try');
  let api: SwitchyardClient;
  let extraWorker: SwitchyardWorker | undefined;
  before(async function () {
    await h.start(this);
    api = new SwitchyardClient({ baseUrl: h.gw.url, apiKey: h.account.key });
  });
  after(async () => {
    await extraWorker?.stop();
    await h.stop();
  });

  const storedInput = async (runId: string) => (await h.gw.stores.runs.get(runId))!.input;

  /** On the run page the form led to: the run ends succeeded, and the page lists `file` among its outputs. */
  async function landsOnSucceededRun(page: Page, file: string): Promise<string> {
    await page.waitForURL(/\/runs\/run_[A-Za-z0-9]+$/);
    const runId = new URL(page.url()).pathname.split('/').pop()!;
    const job = await api.wait(runId, { timeoutMs: 60_000, intervalMs: 200 });
    assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
    await page.locator('.badge-succeeded').waitFor();
    await page.getByRole('link', { name: file }).waitFor();
    return runId;
  }

  /** A succeeded run of the account that made a mesh, through the API. */
  async function aMeshRun() {
    const sent = await api.submit({ kind: 'inference:3d:text-to-mesh', input: { prompt: 'a teapot' } });
    const done = await api.wait(sent.run_id, { timeoutMs: 60_000, intervalMs: 200 });
    return { runId: done.run_id, mesh: done.output!.files.find((f) => f.name === 'mesh.glb')! };
  }

  /** A drop of `bytes` as a file on an element, as a browser delivers one (a DataTransfer holding a File). */
  async function dropFile(page: Page, selector: string, name: string, type: string, bytes: Buffer): Promise<void> {
    await page.locator(selector).waitFor();
    await page.evaluate(
      ([sel, n, t, b64]) => {
        const g = globalThis as any;
        const raw = g.atob(b64);
        const data = new Uint8Array(raw.length);
        for (let i = 0; i < raw.length; i++) data[i] = raw.charCodeAt(i);
        const dt = new g.DataTransfer();
        dt.items.add(new g.File([data], n, { type: t }));
        const zone = g.document.querySelector(sel);
        zone.dispatchEvent(new g.DragEvent('dragover', { bubbles: true, cancelable: true, dataTransfer: dt }));
        zone.dispatchEvent(new g.DragEvent('drop', { bubbles: true, cancelable: true, dataTransfer: dt }));
      },
      [selector, name, type, bytes.toString('base64')] as const,
    );
  }

  it('lists every kind with its price, workers by tier, queue and models; no serious axe violation', async () => {
    const { page } = await h.signedInTab();
    await page.getByRole('heading', { level: 1, name: 'Try a kind' }).waitFor();
    const cards = page.locator('.kind-card');
    await cards.nth(10).waitFor();
    assert.equal(await cards.count(), 11);
    for (let i = 0; i < 11; i++) {
      const card = cards.nth(i);
      assert.match((await card.locator('[data-fact="workers"]').textContent())!, /^1 \(open 0, trusted 1, private 0\)$/);
      assert.match((await card.locator('[data-fact="price"]').textContent())!, /^\d+ credits?$/);
      assert.equal(await card.getByText('Waiting for workers').count(), 0);
    }
    const image = page.locator('[data-kind="inference:image:generate"]');
    assert.equal(await image.locator('[data-fact="price"]').textContent(), '4 credits');
    assert.equal(await image.locator('[data-fact="queued"]').textContent(), '0');
    assert.match((await page.locator('[data-kind="inference:llm:text-generate"] [data-fact="models"]').textContent())!, /demo-llm/);
    await page.locator('.fleet-summary').filter({ hasText: 'all served by a worker now' }).waitFor();
    assert.deepEqual(await h.seriousViolations(page), []);
    await h.screenshots(page, 'try-kinds');

    // Each kind opens its form.
    await image.getByRole('link').click();
    await page.getByRole('heading', { level: 1, name: 'Try image generate' }).waitFor();
    assert.equal(new URL(page.url()).pathname, '/kinds/inference:image:generate');
  });

  it('submits an image job from the generated form and lands on its run, which makes image.png', async () => {
    const tab = await h.signedInTab();
    const { page } = tab;
    await h.open(tab, '/kinds/inference:image:generate');
    await page.getByLabel('prompt').fill('a lighthouse at dusk');
    assert.equal(await page.getByLabel('width').isVisible(), false, 'width is folded under Advanced');
    await page.getByText('Advanced').click();
    const width = page.getByLabel('width');
    assert.equal(await width.getAttribute('type'), 'number');
    assert.equal(await width.getAttribute('min'), '64');
    assert.equal(await width.getAttribute('max'), '4096');
    await width.fill('320');
    assert.deepEqual(await h.seriousViolations(page), []);
    await h.screenshots(page, 'try-image-form');
    await page.getByRole('button', { name: 'Run' }).click();
    const runId = await landsOnSucceededRun(page, 'image.png');
    assert.deepEqual(await storedInput(runId), { prompt: 'a lighthouse at dusk', width: 320 });
  });

  it('uploads an image dropped on the drop zone through /v1/files and makes a mesh of it', async () => {
    const tab = await h.signedInTab();
    const { page } = tab;
    await h.open(tab, '/kinds/inference:3d:image-to-mesh');
    const png = samplePng(16, 3);
    await dropFile(page, '[data-drop-zone="image"]', 'photo.png', 'image/png', png);
    const chosen = page.locator('[data-chosen="image"]');
    await chosen.filter({ hasText: /Uploaded photo\.png \(image\/png/ }).waitFor();
    const fileId = await page.getByLabel('image: file id or URL').inputValue();
    assert.match(fileId, /^file_/);
    const uploaded = await api.files.get(fileId);
    assert.equal(uploaded.size, png.length);
    assert.equal(uploaded.filename, 'photo.png');
    await page.getByRole('button', { name: 'Run' }).click();
    const runId = await landsOnSucceededRun(page, 'mesh.glb');
    assert.equal((await storedInput(runId)).image, fileId);
    const job = await api.get(runId);
    assert.equal((job.output!.input as { sha256: string }).sha256, uploaded.sha256, 'the worker made the mesh of the dropped bytes');
    // And the mesh made of the dropped image turns in the run page's viewer.
    const mesh = page.locator('[data-output-file="mesh.glb"]');
    await mesh.locator('[data-mesh-state="ready"]').waitFor({ timeout: 60_000 });
    await meshDrawn(mesh.locator('model-viewer'));
  });

  it('uploads a file chosen with the picker, at phone width', async () => {
    const tab = await h.signedInTab(VIEWPORTS.phone);
    const { page } = tab;
    await h.open(tab, '/kinds/inference:3d:image-to-mesh');
    await page.getByLabel('Upload a file for image').setInputFiles({ name: 'picked.png', mimeType: 'image/png', buffer: samplePng(8, 5) });
    await page.locator('[data-chosen="image"]').filter({ hasText: /Uploaded picked\.png/ }).waitFor();
    assert.match(await page.getByLabel('image: file id or URL').inputValue(), /^file_/);
    // One column: the code comes below the form.
    const form = (await page.locator('.kind-form').boundingBox())!;
    const code = (await page.locator('.snippets').boundingBox())!;
    assert.ok(code.y >= form.y + form.height, 'the snippets are below the form on a phone');
    assert.deepEqual(await h.seriousViolations(page), []);
    await h.screenshots(page, 'try-mesh-form');
  });

  it("takes a previous run's artifact as a file input", async () => {
    const { runId: meshRun, mesh } = await aMeshRun();
    const tab = await h.signedInTab();
    const { page } = tab;
    await h.open(tab, '/kinds/inference:rig');
    const previous = page.getByLabel('Or a file of a previous run');
    await previous.locator('option', { hasText: meshRun }).waitFor({ state: 'attached' });
    // Only files the field takes are offered: no image.png for a mesh field.
    assert.equal(await previous.locator('option', { hasText: 'image.png' }).count(), 0);
    await previous.selectOption(mesh.url);
    assert.equal(await page.getByLabel('mesh: file id or URL').inputValue(), mesh.url);
    await page.locator('[data-chosen="mesh"]').filter({ hasText: `mesh.glb of ${meshRun}` }).waitFor();
    await page.getByRole('button', { name: 'Run' }).click();
    const runId = await landsOnSucceededRun(page, 'rig.glb');
    assert.equal((await storedInput(runId)).mesh, mesh.url);
  });

  it('prefills fields from the query string, a file field showing the URL as its file', async () => {
    const { mesh } = await aMeshRun();
    const tab = await h.signedInTab();
    const { page } = tab;
    await h.open(tab, `/kinds/inference:texture:generate?mesh=${encodeURIComponent(mesh.url)}&prompt=${encodeURIComponent('weathered bronze')}&resolution=128`);
    assert.equal(await page.getByLabel('mesh: file id or URL').inputValue(), mesh.url);
    await page.locator('[data-chosen="mesh"]').filter({ hasText: 'mesh.glb' }).waitFor();
    assert.equal(await page.getByLabel('prompt').inputValue(), 'weathered bronze');
    assert.equal(await page.getByLabel('resolution').inputValue(), '128', 'an advanced field prefilled is shown');
    assert.ok(await page.getByLabel('resolution').isVisible());
    await page.getByRole('button', { name: 'Run' }).click();
    const runId = await landsOnSucceededRun(page, 'textured.glb');
    assert.deepEqual(await storedInput(runId), { mesh: mesh.url, prompt: 'weathered bronze', resolution: 128 });
  });

  it("shows the gateway's 400 next to the field it names, and bad JSON before sending", async () => {
    const tab = await h.signedInTab();
    const { page, requests } = tab;
    await h.open(tab, '/kinds/inference:image:generate');
    await page.getByLabel('prompt').fill('too wide');
    await page.getByText('Advanced').click();
    // Past the browser's own check (a user's old browser, a hand-edited page): the gateway's word counts.
    await page.evaluate(`document.getElementById('field-width').removeAttribute('max')`);
    await page.getByLabel('width').fill('99999');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('#field-width-error').filter({ hasText: '4096' }).waitFor();
    assert.equal(await page.getByLabel('width').getAttribute('aria-invalid'), 'true');
    await page.getByRole('alert').filter({ hasText: 'invalid_request' }).waitFor();
    assert.match(new URL(page.url()).pathname, /^\/kinds\//, 'no run: the page stays');
    assert.deepEqual(await h.seriousViolations(page), []);

    // A JSON field: text that is no JSON is refused in the page, a JSON the schema refuses by the gateway.
    await h.open(tab, '/kinds/inference:llm:text-generate');
    const messages = page.getByLabel('messages');
    await messages.fill('[{"role": "user", "content": ');
    const posts = requests.length;
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('#field-messages-error').filter({ hasText: 'not valid JSON' }).waitFor();
    assert.ok(!requests.slice(posts).some((u) => u.endsWith('/v1/jobs')), 'nothing was sent');
    await messages.fill('[{"content": "hi"}]');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('#field-messages-error').filter({ hasText: /role/ }).waitFor();
    await h.screenshots(page, 'try-errors');
  });

  describe('the same request as code', () => {
    const expected = { prompt: 'a cat\'s "hat"', seed: 7 };
    let page: Page;
    before(async () => {
      const tab = await h.signedInTab();
      page = tab.page;
      await h.open(tab, '/kinds/inference:image:generate');
      await page.getByLabel('prompt').fill(expected.prompt);
      await page.getByText('Advanced').click();
      await page.getByLabel('seed').fill('7');
      await page.getByLabel('Class').selectOption('batch');
    });

    const snippetOf = async (tab: string, lang: string) => {
      await page.getByRole('tab', { name: tab }).click();
      const code = (await page.locator(`[data-snippet="${lang}"]`).textContent())!;
      assert.ok(!code.includes(h.account.key) && code.includes('SWITCHYARD_API_KEY'), 'the key is never written out');
      return code;
    };
    const keyEnv = () => ({ ...process.env, SWITCHYARD_API_KEY: h.account.key });
    /** The newest run of the account (the one a snippet just made) is the form's job. */
    async function newestRunIsTheFormsJob(): Promise<void> {
      const newest = (await api.list({ limit: 1 })).data[0];
      assert.deepEqual(await storedInput(newest.run_id), expected);
      assert.equal(newest.class, 'batch');
    }

    it('in tabs the arrow keys move between', async () => {
      await page.getByRole('tab', { name: 'curl' }).click();
      await page.keyboard.press('ArrowRight');
      assert.equal(await page.getByRole('tab', { name: 'TypeScript' }).getAttribute('aria-selected'), 'true');
      assert.ok(await page.getByRole('tab', { name: 'TypeScript' }).evaluate((el) => el === (globalThis as any).document.activeElement));
      await page.keyboard.press('End');
      assert.equal(await page.getByRole('tab', { name: 'Go' }).getAttribute('aria-selected'), 'true');
    });

    it('as curl, which makes the same job', async function () {
      requireProgram(this, CURL);
      const curl = await snippetOf('curl', 'curl');
      const made = JSON.parse((await run('bash', ['-c', curl], { env: keyEnv() })).stdout) as { run_id: string; class: string };
      assert.deepEqual(await storedInput(made.run_id), expected);
      assert.equal(made.class, 'batch');
    });

    it('as TypeScript with @switchyard/client, which makes the same job', async () => {
      const ts = await snippetOf('TypeScript', 'typescript');
      assert.deepEqual(JSON.parse(/input: (\{[\s\S]*?\n {2}\}),/.exec(ts)![1]), expected);
      // The snippet is plain JavaScript too: run it with the package as a program would import it.
      const dir = mkdtempSync(path.join(os.tmpdir(), 'sy-try-ts-'));
      try {
        mkdirSync(path.join(dir, 'node_modules', '@switchyard'), { recursive: true });
        symlinkSync(path.resolve('sdk/client'), path.join(dir, 'node_modules', '@switchyard', 'client'));
        writeFileSync(path.join(dir, 'snippet.mjs'), ts);
        const out = await run(process.execPath, [path.join(dir, 'snippet.mjs')], { env: keyEnv() });
        assert.match(out.stdout, /^succeeded \[/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      await newestRunIsTheFormsJob();
    });

    it('as Python with sdk/python, which makes the same job', async function () {
      const python = requireProgram(this, PYTHON3);
      const py = await snippetOf('Python', 'python');
      const out = await run(python, ['-c', py], { env: { ...keyEnv(), PYTHONPATH: path.resolve('sdk/python') } });
      assert.match(out.stdout, /^succeeded \[/);
      await newestRunIsTheFormsJob();
    });

    it('as Go with sdk/go, which builds and makes the same job', async function () {
      const go = requireProgram(this, GO);
      const code = await snippetOf('Go', 'go');
      const dir = mkdtempSync(path.join(os.tmpdir(), 'sy-try-go-'));
      try {
        const mod = ['module trysnippet', '', 'go 1.19', '', 'require github.com/switchyard-dev/switchyard/sdk/go v0.0.0', '', `replace github.com/switchyard-dev/switchyard/sdk/go => ${path.resolve('sdk/go')}`, ''];
        writeFileSync(path.join(dir, 'go.mod'), mod.join('\n'));
        writeFileSync(path.join(dir, 'main.go'), code);
        const out = await run(go, ['run', '.'], { cwd: dir, env: { ...keyEnv(), GOFLAGS: '-mod=mod', GOPROXY: 'off' }, timeout: 120_000 });
        assert.match(out.stdout, /^succeeded\nhttp/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      await newestRunIsTheFormsJob();
    });
  });

  it('asks for the live numbers every few seconds while the list is shown, and no more once it is left', async () => {
    const tab = await h.signedInTab();
    const { page, requests } = tab;
    await page.clock.install();
    await h.open(tab, '/');
    await page.locator('.kind-card').nth(10).waitFor();
    const asked = () => requests.filter((u) => u.endsWith('/v1/capabilities')).length;
    const again = page.waitForRequest((r) => r.url().endsWith('/v1/capabilities'));
    await page.clock.runFor(REFRESH_MS + 500);
    await again;
    // The Runs page asks for the capabilities once itself (its kind filter): counted from after that.
    const runsPageOwn = page.waitForRequest((r) => r.url().endsWith('/v1/capabilities'));
    await page.getByRole('link', { name: 'Runs' }).click();
    await page.getByRole('heading', { level: 1, name: 'Runs' }).waitFor();
    await runsPageOwn;
    const before = asked();
    await page.clock.runFor(REFRESH_MS * 4);
    // A round trip of the page's own after the timers ran: a refresh they had started would be seen by now.
    await page.evaluate(`fetch('/v1/network/capacity').then((r) => r.status)`);
    assert.equal(asked(), before);
  });

  it("adds the chosen model's own input schema to the form", async () => {
    const declared = await fetch(`${h.gw.url}/v1/admin/models/inference:image:generate/try-xl`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ description: 'a declared test model', input_schema: { type: 'object', properties: { steps: { type: 'integer', minimum: 1, maximum: 50 }, width: { type: 'integer', maximum: 1024 } } } }),
    });
    assert.equal(declared.status, 201);
    const tab = await h.signedInTab();
    const { page } = tab;
    await h.open(tab, '/kinds/inference:image:generate');
    const model = page.getByLabel('model');
    await model.locator('option', { hasText: 'try-xl (waiting for workers)' }).waitFor({ state: 'attached' });
    assert.equal(await page.getByLabel('steps').count(), 0, 'no steps field without the model');
    await model.selectOption('try-xl');
    await page.getByText('Advanced').click();
    const steps = page.getByLabel('steps');
    assert.equal(await steps.getAttribute('max'), '50');
    assert.equal(await page.getByLabel('width').getAttribute('max'), '1024', "the model's bound narrows the kind's");
    assert.equal(await page.getByLabel('width').getAttribute('min'), '64', "and keeps the kind's other bound");
    await page.getByLabel('prompt').fill('x');
    await steps.fill('12');
    assert.match((await page.locator('[data-snippet="curl"]').textContent())!, /"input":\{"prompt":"x","model":"try-xl","steps":12\}/);
  });

  // Last: it stops the demo fleet.
  describe('as the fleet changes', () => {
    it('shows a kind waiting for workers when it has none, live, and live again when one connects', async () => {
      const tab = await h.signedInTab();
      const { page } = tab;
      await page.locator('.kind-card').nth(10).waitFor();
      await h.fleet!.stop();
      h.fleet = undefined;
      // No reload: the page asks again every few seconds.
      await page.locator('.fleet-summary').filter({ hasText: '11 waiting for workers' }).waitFor({ timeout: 20_000 });
      const image = page.locator('[data-kind="inference:image:generate"]');
      await image.getByText('Waiting for workers').waitFor();
      assert.equal(await image.locator('[data-fact="workers"]').textContent(), '0 (open 0, trusted 0, private 0)');
      assert.deepEqual(await h.seriousViolations(page), []);
      await h.screenshots(page, 'try-kinds-waiting');

      extraWorker = new SwitchyardWorker({ gateway: h.gw.url, token: await h.gw.accountWorkerToken(h.account.key), kinds: ['inference:image:generate'], slots: 1, handler: createDemoEngine({ delayMs: 0 }), logger: silentLogger });
      await extraWorker.start();
      await image.getByText('Live').waitFor({ timeout: 20_000 });
      assert.equal(await image.locator('[data-fact="workers"]').textContent(), '1 (open 1, trusted 0, private 0)');
      await page.locator('.fleet-summary').filter({ hasText: '10 waiting for workers' }).waitFor();

      // A kind's own page says so too.
      await h.open(tab, '/kinds/inference:rig');
      await page.getByRole('status').filter({ hasText: 'Waiting for workers' }).waitFor();
    });

    it('asked nothing of any other origin', () => h.assertSameOrigin());
  });
});
