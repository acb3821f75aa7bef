import assert from 'node:assert/strict';
import { chromium, type Browser } from 'playwright-core';
import { CHROMIUM, requireProgram } from './helpers/optional-program.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

/**
 * Every HTML page the gateway serves (the queue board, a bot's chat page, the console) loads nothing from
 * another host, so it works on a machine with no network beyond the gateway: a static scan of
 * the pages and of every stylesheet they load, and Chromium recording every request it makes.
 */

const ADMIN = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString('base64')}` };

/** Every URL a page or stylesheet names as something to load or link: src, href, url(), @import. */
export function referencedUrls(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/\b(?:src|href)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))/gi)) found.push(m[1] ?? m[2] ?? m[3]);
  for (const m of text.matchAll(/url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)/gi)) found.push(m[1] ?? m[2] ?? m[3]);
  for (const m of text.matchAll(/@import\s+(?:"([^"]*)"|'([^']*)')/gi)) found.push(m[1] ?? m[2]);
  return found.filter((u) => u !== '' && !u.startsWith('#'));
}

describe('pages the gateway serves load nothing from outside it', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('offline-pages');
  let gw: TestGateway;
  let pages: { name: string; url: string; headers: Record<string, string> }[];

  before(async () => {
    gw = await new TestGateway(prefix).start();
    const { key } = await gw.account(100);
    const bot = await gw.request('POST', '/v1/bots', { key, body: { name: 'helper', model: 'default', systemPrompt: 'Be brief.', tools: [], allowedOrigins: ['https://shop.example'] } });
    assert.equal(bot.status, 201, bot.text);
    pages = [
      { name: 'the queue board', url: `${gw.url}/admin/queues`, headers: ADMIN },
      { name: 'a queue page of the board', url: `${gw.url}/admin/queues/queue/webhooks`, headers: ADMIN },
      { name: "a bot's chat page", url: bot.body.chatUrl, headers: {} },
      { name: 'the console', url: `${gw.url}/`, headers: {} },
    ];
  });

  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  it('names no other host in any page or in any stylesheet a page loads, and every asset it names is served', async () => {
    const origin = new URL(gw.url).origin;
    for (const page of pages) {
      const res = await fetch(page.url, { headers: page.headers });
      assert.equal(res.status, 200, `${page.name}: ${page.url}`);
      assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
      assert.match(res.headers.get('content-security-policy') ?? '', /default-src '(self|none)'/, `${page.name} has a CSP that keeps it to the gateway`);
      const html = await res.text();
      const base = new URL(/<base\s+href="([^"]*)"/i.exec(html)?.[1] ?? page.url, page.url);
      const queue: URL[] = referencedUrls(html).map((u) => new URL(u, base));
      const seen = new Set<string>();
      while (queue.length) {
        const asset = queue.shift()!;
        if (asset.protocol === 'data:') continue;
        assert.equal(asset.origin, origin, `${page.name} loads ${asset.href}`);
        if (seen.has(asset.href)) continue;
        seen.add(asset.href);
        const got = await fetch(asset, { headers: page.headers });
        assert.equal(got.status, 200, `${page.name}: ${asset.href}`);
        if ((got.headers.get('content-type') ?? '').startsWith('text/css')) queue.push(...referencedUrls(await got.text()).map((u) => new URL(u, asset)));
        else await got.arrayBuffer();
      }
      assert.ok(page.name.includes('chat') || seen.size >= 3, `${page.name}: the board's scripts and styles were followed (${[...seen].join(', ')})`);
    }
  });

  describe('in Chromium with every other host unreachable', () => {
    let browser: Browser;
    before(async function () {
      const executablePath = requireProgram(this, CHROMIUM);
      browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
    });
    after(async () => browser?.close());

    it('renders each page while asking for nothing outside the gateway', async () => {
      const origin = new URL(gw.url).origin;
      for (const page of pages) {
        const ctx = await browser.newContext({ extraHTTPHeaders: page.headers });
        const outside: string[] = [];
        // Offline, as far as the page can tell: anything not the gateway fails, and is recorded.
        await ctx.route(
          (url) => url.origin !== origin && url.protocol !== 'data:',
          (route) => {
            outside.push(route.request().url());
            return route.abort('internetdisconnected');
          },
        );
        try {
          const tab = await ctx.newPage();
          const res = await tab.goto(page.url, { waitUntil: 'networkidle' });
          assert.equal(res?.status(), 200, page.name);
          if (page.name.includes('board')) await tab.getByText('webhooks', { exact: true }).first().waitFor({ timeout: 20_000 });
          if (page.name.includes('console')) await tab.getByLabel('API key').waitFor({ timeout: 20_000 });
          assert.deepEqual(outside, [], `${page.name} asked for another host`);
        } finally {
          await ctx.close();
        }
      }
    });
  });
});
