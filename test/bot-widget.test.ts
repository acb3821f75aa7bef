import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { LLM_KIND } from '../api/services/llm/llm-runner.js';
import { SwitchyardWorker } from '../sdk/worker/switchyard-worker.js';
import { CHROMIUM, requireProgram } from './helpers/optional-program.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';

/**
 * The chat page and the embeddable widget, in Debian's Chromium against a real gateway, the
 * real bot WebSocket and the demo llm worker. Host pages come from two real HTTP servers whose
 * origins differ: http://127.0.0.1:<A> is in the bot's allowedOrigins, http://localhost:<B> is not.
 */

const NAME = 'Ada <script>window.__pwned = 1</script>';
const GREETING = 'Hello! <img src=x onerror="window.__pwned = 2"> Ask me anything.';

interface Host {
  origin: string;
  close(): Promise<void>;
}

type HostPage = [html: string, headers?: Record<string, string>];

/** A real HTTP server for host pages, rendered per request (they name the bot, made later). */
async function serveHost(hostname: string, route: (path: string) => HostPage | undefined): Promise<Host> {
  const server = http.createServer((req, res) => {
    const page = route(req.url ?? '');
    if (!page) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', ...page[1] }).end(page[0]);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://${hostname}:${(server.address() as AddressInfo).port}`;
  return { origin, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** The bot frames a page's WebSockets receive and send, parsed. */
function socketFrames(page: Page): { frames: any[]; sent: any[]; urls: string[] } {
  const seen = { frames: [] as any[], sent: [] as any[], urls: [] as string[] };
  page.on('websocket', (ws) => {
    seen.urls.push(ws.url());
    ws.on('framereceived', (f) => seen.frames.push(JSON.parse(String(f.payload))));
    ws.on('framesent', (f) => seen.sent.push(JSON.parse(String(f.payload))));
  });
  return seen;
}

describe('Bot chat page and embeddable widget in Chromium', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('botweb');
  let gw: TestGateway;
  let worker: SwitchyardWorker | undefined;
  let browser: Browser;
  let allowed: Host;
  let other: Host;
  let bot: { id: string; embedToken: string; chatUrl: string };
  const hosts: Host[] = [];
  let key: string;

  // A host page as the docs advise: a CSP that lets in the gateway's script and socket and no
  // inline style, plus hostile CSS that would wreck the widget if it were not isolated.
  const widgetPage = (): HostPage => {
    const wsOrigin = gw.url.replace(/^http/, 'ws');
    const csp = `default-src 'none'; script-src ${gw.url}; connect-src ${wsOrigin}; style-src 'nonce-host'`;
    const html = `<!doctype html><html><head><title>host</title>
<style nonce="host">* { font-size: 40px !important; color: red !important; } button { display: none !important; }</style></head>
<body><p>A host page.</p>
<script src="${gw.url}/embed.js" data-bot="${bot.id}" data-token="${bot.embedToken}"></script></body></html>`;
    return [html, { 'content-security-policy': csp }];
  };
  const framePage = (): HostPage => [`<!doctype html><html><body><iframe src="${bot.chatUrl.replace(/&/g, '&amp;')}" width="400" height="500"></iframe></body></html>`];

  before(async function () {
    const executablePath = requireProgram(this, CHROMIUM);
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(1000));
    const operator = await gw.request('POST', '/v1/admin/operators', { body: { name: 'llm', trust: 'open' }, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    worker = new SwitchyardWorker({
      gateway: gw.url,
      token: operator.body.worker_token,
      kinds: ['inference:llm:text-generate'],
      handler: createDemoEngine({ delayMs: 0 }),
      logger: silentLogger,
      models: { [LLM_KIND]: [{ id: 'demo-llm' }] },
    });
    await worker.start();

    const route = (path: string) => (path === '/widget' ? widgetPage() : path === '/frame' ? framePage() : undefined);
    allowed = await serveHost('127.0.0.1', route);
    other = await serveHost('localhost', route);
    hosts.push(allowed, other);

    const created = await gw.request('POST', '/v1/bots', {
      key,
      body: { name: NAME, model: 'demo-llm', systemPrompt: 'You are terse.', tools: [], greeting: GREETING, allowedOrigins: [allowed.origin] },
    });
    assert.equal(created.status, 201, created.text);
    bot = created.body;
    browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
  });

  after(async () => {
    await browser?.close();
    for (const h of hosts) await h.close();
    await worker?.stop();
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  /** A fresh page that records CSP complaints from the console. */
  async function newPage(): Promise<{ page: Page; console: string[] }> {
    const page = await browser.newPage();
    const console: string[] = [];
    page.on('console', (m) => console.push(m.text()));
    return { page, console };
  }

  /** Types a message into a chat (page, frame or widget) and returns the finished reply bubble's text. */
  async function chat(scope: Page, text: string): Promise<string> {
    await scope.getByTestId('sy-input').fill(text);
    await scope.getByTestId('sy-input').press('Enter');
    const reply = scope.locator('[data-testid="sy-reply"][data-done]').last();
    await reply.waitFor({ timeout: 30_000 });
    return reply.innerText();
  }

  it('serves embed.js without a credential as cacheable JavaScript revalidated by ETag', async () => {
    const res = await gw.request('GET', '/embed.js');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/javascript/);
    assert.match(res.headers.get('cache-control') ?? '', /public/);
    const etag = res.headers.get('etag');
    assert.ok(etag);
    assert.ok(res.text.includes('SwitchyardChat'));
    const again = await gw.request('GET', '/embed.js', { headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
  });

  it('answers an unknown bot with 404 and a wrong token with 401, in the error envelope', async () => {
    const unknown = await gw.request('GET', `/v1/bots/bot_doesnotexist/chat?token=${bot.embedToken}`);
    assert.equal(unknown.status, 404);
    assert.equal(errorCode(unknown), 'not_found');
    const wrong = await gw.request('GET', `/v1/bots/${bot.id}/chat?token=not-the-token`);
    assert.equal(wrong.status, 401);
    assert.equal(errorCode(wrong), 'unauthorized');
    const none = await gw.request('GET', `/v1/bots/${bot.id}/chat`);
    assert.equal(none.status, 401);
  });

  it("opens a secure bot's chat page with the owner's key on a session token, never the key itself", async () => {
    const created = await gw.request('POST', '/v1/bots', { key, body: { name: 'secure', model: 'demo-llm', greeting: 'hi', allowedOrigins: [allowed.origin], secure: true } });
    assert.equal(created.status, 201, created.text);
    const page = await gw.request('GET', `/v1/bots/${created.body.id}/chat`, { key });
    assert.equal(page.status, 200, page.text);
    assert.ok(!page.text.includes(key), 'the account key is not in the page');
    const wsUrl = /data-ws="([^"]+)"/.exec(page.text)![1].replace(/&amp;/g, '&');
    assert.ok(!wsUrl.includes(created.body.embedToken), 'a secure bot refuses its embed token; the page carries a session token');
    const { default: WebSocket } = await import('ws');
    const socket = new WebSocket(wsUrl, { headers: { origin: new URL(gw.url).origin } });
    const hello = await new Promise<any>((resolve, reject) => {
      socket.once('message', (d) => resolve(JSON.parse(d.toString())));
      socket.once('unexpected-response', (_req, res) => reject(new Error(`refused ${res.statusCode}`)));
      socket.once('error', reject);
    });
    assert.equal(hello.type, 'hello');
    socket.close();
  });

  it('serves the chat page uncached, with a strict CSP framing it only to allowed origins and the name escaped', async () => {
    const res = await fetch(bot.chatUrl);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const csp = Object.fromEntries((res.headers.get('content-security-policy') ?? '').split(';').map((d) => d.trim().split(/\s+/)).map(([k, ...v]) => [k, v]));
    assert.deepEqual(csp['default-src'], ["'none'"]);
    assert.match(csp['script-src'].join(' '), /^'nonce-[A-Za-z0-9+/=]+'$/);
    assert.deepEqual(csp['connect-src'], [gw.url.replace(/^http/, 'ws')]);
    // The gateway's own origin may be listed besides 'self'; the other host's never.
    assert.deepEqual(csp['frame-ancestors'].filter((o: string) => o !== gw.url), ["'self'", allowed.origin]);
    const html = await res.text();
    assert.ok(!html.includes('<script>window'), 'the bot name is not markup');
    assert.ok(html.includes('Ada &#60;script&#62;'));
  });

  it('chats on the chat page: greeting as text, a typed message streamed into a reply by the llm worker', async () => {
    const { page, console } = await newPage();
    const ws = socketFrames(page);
    await page.goto(bot.chatUrl);
    await page.getByTestId('sy-greeting').waitFor();
    assert.equal(await page.getByTestId('sy-greeting').innerText(), GREETING);
    assert.equal(await page.getByTestId('sy-title').innerText(), NAME);
    assert.equal(await page.title(), NAME);

    const shown = await chat(page, 'tell me about lighthouses');
    const reply = ws.frames.find((f) => f.type === 'reply');
    assert.ok(reply.reply.length > 0);
    assert.equal(shown, reply.reply);
    assert.ok(ws.frames.some((f) => f.type === 'delta'), 'the reply was streamed');
    assert.equal(await page.evaluate('window.__pwned'), undefined, 'neither name nor greeting ran as script');

    // The next message continues the same conversation.
    await chat(page, 'and who keeps them?');
    assert.deepEqual(ws.sent.map((m) => m.conversation_id), [undefined, reply.conversation_id]);
    assert.deepEqual(console.filter((m) => /Content Security Policy/i.test(m)), [], 'the page lives within its own CSP');
    await page.close();
  });

  it('embeds on an allowed origin: the widget greets and answers, untouched by host CSS and within host CSP', async () => {
    const { page, console } = await newPage();
    const ws = socketFrames(page);
    await page.goto(`${allowed.origin}/widget`);
    await page.getByTestId('sy-launcher').click();
    await page.getByTestId('sy-greeting').waitFor();
    assert.equal(await page.getByTestId('sy-greeting').innerText(), GREETING);
    // The host's `* { font-size: 40px !important }` does not cross into the shadow root.
    assert.equal(await page.getByTestId('sy-greeting').evaluate((e) => (globalThis as any).getComputedStyle(e).fontSize), '14px');

    const shown = await chat(page, 'what is a switchyard?');
    assert.equal(shown, ws.frames.find((f) => f.type === 'reply').reply);
    assert.ok(ws.urls.every((u) => u.startsWith(`${gw.url.replace(/^http/, 'ws')}/v1/bots/${bot.id}/ws?token=`)), 'the socket goes to the gateway that served embed.js');
    assert.equal(await page.evaluate('window.SwitchyardChat.widgets[0].state()'), 'ready');
    assert.deepEqual(console.filter((m) => /Content Security Policy/i.test(m)), []);
    await page.close();
  });

  it('refuses on an origin not in allowedOrigins: the widget says so and shows no greeting', async () => {
    const { page } = await newPage();
    const ws = socketFrames(page);
    await page.goto(`${other.origin}/widget`);
    await page.getByTestId('sy-launcher').click();
    const status = page.getByTestId('sy-status');
    await page.locator('[data-testid="sy-chat"][data-state="refused"]').waitFor();
    assert.match(await status.innerText(), /not allowed to use this bot/);
    assert.equal(ws.urls.length, 1, 'the widget did try the gateway');
    assert.deepEqual(ws.frames, [], 'the gateway sent nothing');
    assert.equal(await page.getByTestId('sy-greeting').count(), 0);
    assert.equal(await page.getByTestId('sy-input').isDisabled(), true);
    await page.close();
  });

  it('renders the chat page in an iframe on an allowed origin, and Chromium blocks it on any other', async () => {
    const { page: good } = await newPage();
    await good.goto(`${allowed.origin}/frame`);
    await good.frameLocator('iframe').getByTestId('sy-greeting').waitFor();
    await good.close();

    const { page: bad, console } = await newPage();
    await bad.goto(`${other.origin}/frame`);
    await until('the frame-ancestors violation', async () => console.some((m) => /frame-ancestors/.test(m)));
    const frame = bad.frames().find((f) => f !== bad.mainFrame());
    assert.ok(frame);
    assert.equal(await frame.locator('[data-testid="sy-chat"]').count(), 0, 'nothing of the chat rendered');
    await bad.close();
  });

  // Last: it takes the llm worker away.
  it("shows the bot's error in the widget when no llm worker can answer, and stays usable", async () => {
    await worker?.stop();
    worker = undefined;
    const { page } = await newPage();
    await page.goto(`${allowed.origin}/widget`);
    await page.getByTestId('sy-launcher').click();
    await page.getByTestId('sy-greeting').waitFor();
    await page.getByTestId('sy-input').fill('anyone there?');
    await page.getByTestId('sy-input').press('Enter');
    await page.getByTestId('sy-error').waitFor();
    assert.ok((await page.getByTestId('sy-error').innerText()).length > 0);
    assert.equal(await page.getByTestId('sy-reply').count(), 0);
    assert.equal(await page.getByTestId('sy-input').isDisabled(), false);
    await page.close();
  });
});
