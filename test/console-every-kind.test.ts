import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { SwitchyardClient } from '../sdk/client/index.js';
import { ConsoleHarness, meshDrawn, type ConsoleTab } from './helpers/console-harness.js';
import { FFMPEG, findProgram } from './helpers/optional-program.js';

/**
 * The "done": a new user signed in from the dev banner's link tries every kind from
 * its form, without the API docs, and sees every kind of output on the run page. One tab goes
 * through all 11 kinds as a person would: type the required fields, pick an earlier run's file
 * for a file field, Run, and look at what came back, each in its own viewer.
 */
describe('console: every kind tried from its form, every output seen', function () {
  this.timeout(300_000);
  const h = new ConsoleHarness('every-kind');
  let api: SwitchyardClient;
  let tab: ConsoleTab;
  let page: Page;
  before(async function () {
    await h.start(this);
    api = new SwitchyardClient({ baseUrl: h.gw.url, apiKey: h.account.key });
    tab = await h.signedInTab();
    page = tab.page;
  });
  after(async () => h.stop());

  /** The file `name` of a run, as the gateway listed it. */
  const fileOf = async (runId: string, name: string) => (await api.get(runId)).output!.files.find((f) => f.name === name)!;
  const card = (name: string) => page.locator(`[data-output-file="${name}"]`);

  /** Fills the kind's form as a person would and runs it; resolves on the run page once it succeeded. */
  async function tryKind(kind: string, fill: () => Promise<void>): Promise<string> {
    await h.open(tab, `/kinds/${kind}`);
    await page.getByRole('button', { name: 'Run' }).waitFor();
    await fill();
    await page.getByRole('button', { name: 'Run' }).click();
    await page.waitForURL(/\/runs\/run_[A-Za-z0-9]+$/);
    const runId = new URL(page.url()).pathname.split('/').pop()!;
    // The live page turns to succeeded on its own: no reload.
    await page.locator('.badge-succeeded').waitFor({ timeout: 60_000 });
    return runId;
  }
  /** Picks an earlier run's file for a file field, from the list the form offers. */
  const pickEarlier = async (field: string, url: string) => {
    const select = page.getByLabel('Or a file of a previous run');
    await select.locator(`option[value="${url}"]`).waitFor({ state: 'attached' });
    await select.selectOption(url);
    assert.equal(await page.getByLabel(`${field}: file id or URL`).inputValue(), url);
  };
  const imageLoaded = async (name: string) => {
    const img = card(name).locator('.image-zoom img');
    await img.waitFor();
    await page.waitForFunction((el) => (el as any).complete && (el as any).naturalWidth > 0, await img.elementHandle());
  };
  /** A mesh drawn in its view; the rig's is untextured, so fewer colours show it. */
  const meshReady = async (name: string, minColours?: number) => {
    await card(name).locator('[data-mesh-state="ready"]').waitFor({ timeout: 60_000 });
    await meshDrawn(card(name).locator('model-viewer'), minColours);
  };
  const audioHeard = async (name: string) => {
    await card(name).locator('canvas[data-waveform="drawn"]').waitFor({ timeout: 30_000 });
    assert.match((await card(name).locator('[data-audio-duration]').textContent()) ?? '', /^\d:\d\d\.\d$/);
  };
  const textShown = async (name: string) => {
    const text = card(name).locator('[data-text-view]');
    await text.waitFor();
    assert.ok(((await text.textContent()) ?? '').trim().length > 0, `${name} shows its text`);
  };

  let imageRun: string;
  let meshRun: string;
  let speechRun: string;

  it('image generate: the image', async () => {
    imageRun = await tryKind('inference:image:generate', () => page.getByLabel('prompt').fill('a lighthouse at dusk'));
    await imageLoaded('image.png');
  });

  it('image to mesh, from the image: the mesh turns in the viewer', async () => {
    const image = await fileOf(imageRun, 'image.png');
    meshRun = await tryKind('inference:3d:image-to-mesh', () => pickEarlier('image', image.url));
    await meshReady('mesh.glb');
  });

  it('text to mesh: the mesh', async () => {
    await tryKind('inference:3d:text-to-mesh', () => page.getByLabel('prompt').fill('a teapot'));
    await meshReady('mesh.glb');
  });

  it('rig, from the mesh: the rigged mesh and its bones', async () => {
    const mesh = await fileOf(meshRun, 'mesh.glb');
    await tryKind('inference:rig', () => pickEarlier('mesh', mesh.url));
    await card('rig.glb').locator('[data-bone-count]').waitFor({ timeout: 60_000 });
    assert.ok(Number(await card('rig.glb').locator('[data-bone-count]').textContent()) > 0);
    await meshReady('rig.glb', 6);
  });

  it('texture, from the mesh: the maps as a grid and the textured mesh', async () => {
    const mesh = await fileOf(meshRun, 'mesh.glb');
    await tryKind('inference:texture:generate', () => pickEarlier('mesh', mesh.url));
    for (const map of ['albedo.png', 'normal.png', 'roughness.png']) await imageLoaded(map);
    await meshReady('textured.glb');
  });

  it('video generate: the video plays (MP4 where ffmpeg makes it; otherwise a download)', async () => {
    const runId = await tryKind('inference:video:generate', () => page.getByLabel('prompt').fill('waves on a shore'));
    const [file] = (await api.get(runId)).output!.files;
    if (findProgram(FFMPEG)) {
      assert.equal(file.content_type, 'video/mp4');
      const video = card(file.name).locator('video');
      await video.waitFor();
      await page.waitForFunction((el) => (el as any).readyState >= 2, await video.elementHandle(), { timeout: 30_000 });
    } else {
      await card(file.name).getByRole('link', { name: /download/i }).first().waitFor();
    }
  });

  it('llm text generate: the text', async () => {
    await tryKind('inference:llm:text-generate', () => page.getByLabel('prompt').fill('Say hello.'));
    await textShown('completion.txt');
  });

  it('music and sound effects: players with a waveform', async () => {
    await tryKind('inference:audio:music-generate', () => page.getByLabel('prompt').fill('a calm piano'));
    await audioHeard('music.wav');
    await tryKind('inference:audio:sfx-generate', () => page.getByLabel('prompt').fill('a door creaks'));
    await audioHeard('sfx.wav');
  });

  it('text to speech, then its speech transcribed: the player, then the transcript', async () => {
    speechRun = await tryKind('inference:audio:text-to-speech', () => page.getByLabel('text').fill('hello world'));
    await audioHeard('speech.wav');
    const speech = await fileOf(speechRun, 'speech.wav');
    await tryKind('inference:audio:transcribe', () => pickEarlier('audio', speech.url));
    await textShown('transcript.txt');
  });

  it('went to nothing but the gateway, and tried all 11 kinds', async () => {
    h.assertSameOrigin();
    const kinds = new Set((await api.list({ limit: 100 })).data.map((r) => r.kind));
    assert.equal(kinds.size, 11, [...kinds].join(', '));
  });
});
