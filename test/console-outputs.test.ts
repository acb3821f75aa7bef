import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import type { Page } from 'playwright-core';
import { SwitchyardClient, type JobResult } from '../sdk/client/index.js';
import { readGlb } from '../sdk/engines/demo/glb-read.js';
import { ConsoleHarness, VIEWPORTS, meshDrawn, type ConsoleTab } from './helpers/console-harness.js';
import { until } from './helpers/harness.js';
import { FFMPEG, requireProgram } from './helpers/optional-program.js';

type OutputFile = { url: string; name: string; content_type: string | null; size: number | null; sha256: string | null };
const files = (run: JobResult) => (run.output as { files: OutputFile[] }).files;

/**
 * The run page's outputs (api/console/outputs/): each file shown by its type (an image that
 * zooms, a mesh in model-viewer with its skeleton, audio with a waveform, video, texture maps,
 * text), its facts and download link, and "use as input" chaining to the next kind, all read
 * from the gateway's own origin.
 */
describe('console run outputs', function () {
  this.timeout(180_000);
  const h = new ConsoleHarness('outputs', { delayMs: 50 });
  let api: SwitchyardClient;
  let tab: ConsoleTab;
  const run = async (kind: string, input: Record<string, unknown>) => {
    const submitted = await api.submit({ kind, input });
    const done = await api.wait(submitted.run_id, { timeoutMs: 60_000, intervalMs: 100 });
    assert.equal(done.status, 'succeeded', `${kind}: ${JSON.stringify(done.error)}`);
    return done;
  };
  const card = (page: Page, name: string) => page.locator(`[data-output-file="${name}"]`);
  /** axe at desktop and phone widths, nothing wider than a phone (once the viewers have resized), and the screenshots. */
  const checkPage = async (page: Page, name: string) => {
    assert.deepEqual(await h.seriousViolations(page), []);
    await page.setViewportSize(VIEWPORTS.phone);
    await page.waitForFunction(() => (globalThis as any).document.documentElement.scrollWidth <= (globalThis as any).innerWidth);
    assert.deepEqual(await h.seriousViolations(page), []);
    await page.setViewportSize(VIEWPORTS.desktop);
    await h.screenshots(page, name);
  };
  let imageRun: JobResult;
  let meshRun: JobResult;

  before(async function () {
    await h.start(this);
    api = new SwitchyardClient({ baseUrl: h.gw.url, apiKey: h.account.key });
    tab = await h.signedInTab();
    imageRun = await run('inference:image:generate', { prompt: 'a red fox in the snow', width: 256, height: 256 });
    meshRun = await run('inference:3d:image-to-mesh', { image: files(imageRun)[0].url });
  });
  after(async () => h.stop());

  it('shows an image inline, loaded, and zooms it in a dialog that Escape closes', async () => {
    const { page } = tab;
    await h.open(tab, `/runs/${imageRun.run_id}`);
    const img = card(page, 'image.png').locator('.image-zoom img');
    await img.waitFor();
    await page.waitForFunction((el) => (el as any).complete && (el as any).naturalWidth > 0, await img.elementHandle());
    assert.match((await img.getAttribute('alt')) ?? '', /image\.png/);
    const zoom = card(page, 'image.png').getByRole('button', { name: /show image\.png at full size/ });
    await zoom.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'image.png at full size' });
    await dialog.waitFor();
    await page.waitForFunction(() => (globalThis as any).document.querySelector('.image-dialog-body img').naturalWidth === 256);
    assert.deepEqual(await h.seriousViolations(page), []);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    await checkPage(page, 'image');
  });

  it('shows every file with its name, size, type, sha256 and a download of exactly those bytes', async () => {
    const { page } = tab;
    for (const r of [imageRun, meshRun]) {
      await h.open(tab, `/runs/${r.run_id}`);
      for (const f of files(r)) {
        const c = card(page, f.name);
        await c.waitFor();
        assert.equal(await c.locator('[data-fact="name"]').textContent(), f.name);
        assert.match((await c.locator('[data-fact="size"]').textContent()) ?? '', /\d+(\.\d)? (B|KB|MB)/);
        assert.equal(await c.locator('[data-fact="type"]').textContent(), f.content_type);
        assert.equal(await c.locator('[data-sha256]').getAttribute('data-sha256'), f.sha256);
        assert.match((await c.locator('[data-sha256]').textContent()) ?? '', /^[0-9a-f]{12}…[0-9a-f]{4}$/);
        assert.equal(await c.getByRole('button', { name: `Copy SHA-256 of ${f.name}` }).count(), 1, 'each copy button says which file it copies');
        const link = c.getByRole('link', { name: `Download ${f.name}` });
        assert.equal(await link.getAttribute('download'), f.name);
        const href = await link.evaluate((a) => (a as any).href as string);
        assert.equal(new URL(href).origin, h.origin);
        const bytes = Buffer.from(await (await fetch(href)).arrayBuffer());
        assert.equal(createHash('sha256').update(bytes).digest('hex'), f.sha256, `${f.name} downloads the bytes its sha256 names`);
      }
    }
  });

  it('renders an image-to-mesh run in model-viewer, and chains it to rig in one click with the skeleton shown', async () => {
    const { page } = tab;
    await h.open(tab, `/runs/${meshRun.run_id}`);
    const mesh = card(page, 'mesh.glb');
    await mesh.locator('[data-mesh-state="ready"]').waitFor({ timeout: 60_000 });
    const viewer = mesh.locator('model-viewer');
    assert.match((await viewer.getAttribute('alt')) ?? '', /3D view of .*mesh\.glb/);
    assert.equal(await viewer.getAttribute('auto-rotate'), null);
    assert.notEqual(await viewer.getAttribute('camera-controls'), null);
    // Where the viewer would fetch decoders of compressed meshes from: the gateway, never a CDN.
    const decoders = (await page.evaluate(() => {
      const el = (globalThis as any).customElements.get('model-viewer');
      return [el.dracoDecoderLocation, el.ktx2TranscoderLocation, el.lottieLoaderLocation, el.meshoptDecoderLocation ?? null];
    })) as Array<string | null>;
    for (const url of decoders.slice(0, 3)) assert.equal(new URL(url!).origin, h.origin, `${url} is on the gateway`);
    assert.equal(decoders[3], null, 'no meshopt decoder is ever fetched');
    // model-viewer draws its frame a moment after `load`: poll the pixels until the mesh is in them.
    await meshDrawn(viewer);
    assert.match((await mesh.locator('dl.facts').first().textContent()) ?? '', /Vertices\d[\d,]*Triangles\d/);
    await checkPage(page, 'mesh');

    await mesh.getByRole('button', { name: 'Send to inference:rig' }).click();
    await page.waitForURL((u) => u.pathname.startsWith('/runs/') && !u.pathname.endsWith(meshRun.run_id));
    const rigId = new URL(page.url()).pathname.split('/').pop()!;
    const rigRun = await api.wait(rigId, { timeoutMs: 60_000, intervalMs: 100 });
    assert.equal(rigRun.status, 'succeeded');
    assert.equal(rigRun.kind, 'inference:rig');
    assert.equal(rigRun.confidentiality, meshRun.confidentiality);
    const rigFile = files(rigRun)[0];
    const glb = readGlb(Buffer.from(await (await fetch(rigFile.url)).arrayBuffer()));
    const joints = (glb.json.skins as Array<{ joints: number[] }>)[0].joints.length;
    assert.ok(joints > 1);
    // The new run's page follows it live: its outputs appear when it succeeds, no reload.
    const rig = card(page, 'rig.glb');
    await rig.locator('[data-bone-count]').waitFor({ timeout: 60_000 });
    assert.equal(Number(await rig.locator('[data-bone-count]').textContent()), joints);
    await rig.getByText(`Skeleton: ${joints} bones`).click();
    assert.equal(await rig.locator('.bone-names li').count(), joints);
    await rig.locator('[data-mesh-state="ready"]').waitFor({ timeout: 60_000 });
    await meshDrawn(rig.locator('model-viewer'), 6); // untextured: its lit faces
    await checkPage(page, 'rig');
  });

  it('opens the form of a kind that needs more than the file, with the file filled in', async () => {
    const { page } = tab;
    await h.open(tab, `/runs/${imageRun.run_id}`);
    const link = card(page, 'image.png').getByRole('link', { name: /Open inference:video:generate with it/ });
    const href = new URL((await link.getAttribute('href'))!, h.origin);
    assert.equal(href.pathname, '/kinds/inference:video:generate');
    assert.equal(href.searchParams.get('image'), files(imageRun)[0].url);
    await link.click();
    assert.equal(await page.getByLabel('image: file id or URL').inputValue(), files(imageRun)[0].url);
    await page.locator('[data-chosen="image"]').filter({ hasText: 'image.png' }).waitFor();
  });

  it('shows a texture run as a labelled grid of maps and its textured mesh in the viewer', async () => {
    const { page } = tab;
    const textureRun = await run('inference:texture:generate', { mesh: files(meshRun)[0].url, resolution: 128 });
    await h.open(tab, `/runs/${textureRun.run_id}`);
    const grid = page.getByRole('region', { name: 'Texture maps' });
    await grid.waitFor();
    for (const title of ['Albedo (base colour) map', 'Normal map', 'Roughness map']) {
      const img = grid.getByRole('article', { name: title }).locator('.image-zoom img');
      await page.waitForFunction((el) => (el as any).complete && (el as any).naturalWidth === 128, await img.elementHandle());
    }
    const textured = card(page, 'textured.glb');
    await textured.locator('[data-mesh-state="ready"]').waitFor({ timeout: 60_000 });
    // Below the maps: it draws once scrolled into view, as a person scrolling down sees it.
    const viewer = textured.locator('model-viewer');
    await viewer.scrollIntoViewIfNeeded();
    await meshDrawn(viewer);
    await checkPage(page, 'texture');
  });

  it('plays an audio run, with its duration and a drawn waveform', async () => {
    const { page } = tab;
    const speech = await run('inference:audio:text-to-speech', { text: 'Hello from the switchyard console.' });
    await h.open(tab, `/runs/${speech.run_id}`);
    const audio = card(page, 'speech.wav');
    await audio.locator('canvas[data-waveform="drawn"]').waitFor();
    // A function, not a string: the page's CSP refuses eval, which Playwright polls a string with.
    await page.waitForFunction(() => (globalThis as any).document.querySelector('audio').duration > 0);
    const ink = (await page.evaluate(`(() => {
      const c = document.querySelector('canvas.waveform');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      const seen = new Set();
      for (let i = 0; i < d.length; i += 4) seen.add(d[i] + ',' + d[i + 1] + ',' + d[i + 2]);
      let tall = 0;
      for (let x = 0; x < c.width; x++) { let n = 0; for (let y = 0; y < c.height; y++) { const i = (y * c.width + x) * 4; if (d[i] !== d[0] || d[i + 1] !== d[1] || d[i + 2] !== d[2]) n++; } if (n > 4) tall++; }
      return { colours: seen.size, tall };
    })()`)) as { colours: number; tall: number };
    assert.ok(ink.colours >= 2 && ink.tall > 50, `the waveform has ink in it (${JSON.stringify(ink)})`);
    assert.match((await audio.locator('canvas.waveform').getAttribute('aria-label')) ?? '', /Waveform of speech\.wav, \d:\d\d\.\d long/);
    assert.match((await audio.locator('[data-audio-duration]').textContent()) ?? '', /^\d:\d\d\.\d$/);
    await checkPage(page, 'audio');
    assert.ok(await audio.getByRole('link', { name: /Open inference:audio:transcribe|Send to inference:audio:transcribe/ }).or(audio.getByRole('button', { name: 'Send to inference:audio:transcribe' })).count());
  });

  it("shows an LLM run's completion.txt as text", async () => {
    const { page } = tab;
    const llm = await run('inference:llm:text-generate', { prompt: 'Say something about trains.' });
    const text = (llm.output as unknown as { text: string }).text;
    await h.open(tab, `/runs/${llm.run_id}`);
    const pre = card(page, 'completion.txt').locator('[data-text-view]');
    await pre.waitFor();
    assert.equal(await pre.textContent(), text);
    assert.equal(await pre.evaluate((el) => (globalThis as any).getComputedStyle(el).whiteSpace), 'pre-wrap');
    await checkPage(page, 'text');
  });

  describe('with ffmpeg', () => {
    before(function () {
      requireProgram(this, FFMPEG);
    });

    it('plays a video run of the local engine', async () => {
      const { page } = tab;
      const video = await run('inference:video:generate', { prompt: 'a slow blue sunrise', duration_s: 1, fps: 12 });
      const file = files(video)[0];
      assert.equal(file.content_type, 'video/mp4');
      await h.open(tab, `/runs/${video.run_id}`);
      await card(page, file.name).locator('video').waitFor();
      await page.waitForFunction(() => (globalThis as any).document.querySelector('video').readyState >= 2);
      await checkPage(page, 'video');
    });
  });

  // Its own suite, so it runs after the one above (mocha runs a suite's tests before its suites).
  describe('all told', () => {
    it('asked nothing of any other origin, model-viewer included', () => h.assertSameOrigin());
  });
});
