import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import type { Context } from 'mocha';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { PNG } from 'pngjs';
import { devVerifier, DEV_VERIFIER_ISSUER } from '../../api/main/dev/dev-attestation.js';
import { startDevFleet, type DevFleet } from '../../api/main/dev/dev-fleet.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './harness.js';
import { CHROMIUM, requireProgram } from './optional-program.js';

/**
 * A gateway, the dev demo fleet (real local engines where this machine has them, the demo engine
 * for the rest, and with `privateTier` a private worker attesting with TEST evidence), an
 * account, and Debian's Chromium: what every console test drives. Every request a page makes
 * is recorded, and any to another origin is refused and fails `assertSameOrigin`.
 */
export interface ConsoleHarnessOptions {
  /** Start the private demo worker and make the gateway trust the dev verifier. */
  privateTier?: boolean;
  /** How long a demo job takes (DEMO_DELAY_MS): long enough to see a run queued and running. */
  delayMs?: number;
  /** Extra gateway settings. */
  env?: Record<string, string>;
  /** Credits of the account. */
  credits?: number;
  /** Start the dev demo fleet (default true); false leaves the kinds to workers the test starts. */
  fleet?: boolean;
}

export interface ConsoleTab {
  page: Page;
  context: BrowserContext;
  /** Every URL the page asked for, in order. */
  requests: string[];
}

/** Phone and desktop viewports the screenshots are taken at. */
export const VIEWPORTS = { desktop: { width: 1280, height: 900 }, phone: { width: 390, height: 844 } } as const;

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export class ConsoleHarness {
  gw!: TestGateway;
  fleet?: DevFleet;
  browser!: Browser;
  account!: { id: string; key: string };
  /** Screenshots and other files a test leaves for people to look at. */
  readonly outDir: string;
  private readonly dataDir: string;
  private readonly tabs: ConsoleTab[] = [];

  constructor(readonly name: string, readonly opts: ConsoleHarnessOptions = {}) {
    this.prefix = uniquePrefix(`console-${name}`);
    this.dataDir = mkdtempSync(path.join(os.tmpdir(), `sy-console-${name}-`));
    this.outDir = path.join(this.dataDir, 'screenshots');
    mkdirSync(this.outDir, { recursive: true });
  }
  readonly prefix: string;

  /** Starts everything; pending (or, under CI=true, failing) without Chromium. Call from `before`. */
  async start(ctx: Context): Promise<this> {
    const executablePath = requireProgram(ctx, CHROMIUM);
    const env: Record<string, string> = { DATA_DIR: this.dataDir, ...this.opts.env };
    let keyFile: string | undefined;
    if (this.opts.privateTier) {
      const v = await devVerifier(this.dataDir);
      keyFile = v.keyFile;
      Object.assign(env, { ATTESTATION_JWKS: v.jwksFile, ATTESTATION_ISSUER: DEV_VERIFIER_ISSUER });
    }
    this.gw = await new TestGateway(this.prefix, env).start();
    this.account = await this.gw.account(this.opts.credits ?? 10_000, `console ${this.name}`);
    if (this.opts.fleet !== false) this.fleet = await startDevFleet(this.gw.gateway, this.gw.url, this.opts.delayMs ?? 300, keyFile);
    this.browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
    return this;
  }

  async stop(): Promise<void> {
    for (const t of this.tabs) await t.context.close().catch(() => undefined);
    await this.browser?.close().catch(() => undefined);
    await this.fleet?.stop();
    await this.gw?.stop();
    await cleanupPrefix(this.prefix);
    if (!process.env.KEEP_CONSOLE_SCREENSHOTS) rmSync(this.dataDir, { recursive: true, force: true });
  }

  get origin(): string {
    return new URL(this.gw.url).origin;
  }

  /** A one-time sign-in link of the test account, as the dev banner prints one. */
  async signInLink(): Promise<string> {
    const { code } = await this.gw.services.consoleSignIn.createCode(this.account.id);
    return `${this.gw.url}/sign-in#code=${code}`;
  }

  /** A new tab (own context: own session storage) that records every request and refuses other origins. */
  async tab(viewport: { width: number; height: number } = VIEWPORTS.desktop): Promise<ConsoleTab> {
    const context = await this.browser.newContext({ viewport });
    const requests: string[] = [];
    const origin = this.origin;
    context.on('request', (r) => requests.push(r.url()));
    await context.route(
      (url) => url.origin !== origin && url.protocol !== 'data:' && url.protocol !== 'blob:',
      (route) => route.abort('internetdisconnected'),
    );
    const page = await context.newPage();
    const tab = { page, context, requests };
    this.tabs.push(tab);
    return tab;
  }

  /** A tab signed in through a sign-in link, on the page the link lands on. */
  async signedInTab(viewport?: { width: number; height: number }): Promise<ConsoleTab> {
    const tab = await this.tab(viewport);
    await tab.page.goto(await this.signInLink());
    await tab.page.getByRole('link', { name: 'Runs' }).waitFor();
    return tab;
  }

  /** Opens a console path (e.g. `/runs/run_...`) in a signed-in tab. */
  async open(tab: ConsoleTab, consolePath: string): Promise<void> {
    await tab.page.goto(`${this.gw.url}${consolePath}`);
  }

  /** Fails when any request of any tab went to another origin than the gateway's. */
  assertSameOrigin(): void {
    const outside = this.tabs.flatMap((t) => t.requests).filter((u) => !u.startsWith('data:') && !u.startsWith('blob:') && new URL(u).origin !== this.origin);
    assert.deepEqual(outside, [], 'the console asked for something outside the gateway');
  }

  /** axe-core's serious and critical violations of the page as it is now (injected by the test, not the page). */
  async seriousViolations(page: Page): Promise<string[]> {
    await page.evaluate(AXE_SOURCE);
    const result = (await page.evaluate(`axe.run(document, { resultTypes: ['violations'] })`)) as {
      violations: Array<{ id: string; impact: string; help: string; nodes: Array<{ target: string[] }> }>;
    };
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }

  /** A screenshot of the page at desktop and phone widths, under the test's temp dir. */
  async screenshots(page: Page, name: string): Promise<string[]> {
    const files: string[] = [];
    const before = page.viewportSize();
    for (const [label, size] of Object.entries(VIEWPORTS)) {
      await page.setViewportSize(size);
      const file = path.join(this.outDir, `${name}-${label}.png`);
      await page.screenshot({ path: file, fullPage: true });
      files.push(file);
    }
    if (before) await page.setViewportSize(before);
    return files;
  }
}

/** Distinct colours of a PNG (quantized to 5 bits a channel, so antialiasing noise is not counted twice). */
export function colours(png: Buffer): number {
  const { data } = PNG.sync.read(png);
  const seen = new Set<number>();
  for (let i = 0; i < data.length; i += 4) seen.add(((data[i] >> 3) << 10) | ((data[i + 1] >> 3) << 5) | (data[i + 2] >> 3));
  return seen.size;
}

/**
 * Waits until a 3D view (a model-viewer element) shows a mesh: a blank view has one colour, a
 * textured mesh dozens, an untextured one (a rig's) its lit faces and their edges, about a
 * dozen. model-viewer draws a moment after `load`, and only while on screen, so the view is
 * scrolled to and its pixels polled.
 */
export async function meshDrawn(viewer: Locator, minColours = 20): Promise<void> {
  await viewer.scrollIntoViewIfNeeded();
  let seen = 0;
  await until('the 3D view to show a shaded mesh, not a blank or flat box', async () => (seen = colours(await viewer.screenshot())) >= minColours, 30_000).catch((err: Error) =>
    assert.fail(`${err.message} (${seen} colours)`),
  );
}
