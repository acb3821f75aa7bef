import { ApiError, NotFoundError } from '../../../models/errors.js';
import { ConsoleAssets } from '../console/console-assets.js';
import { CONSOLE_CSP, consolePageHtml } from '../console/console-page.js';
import type { Ctx } from '../context.js';
import type { RouteSpec } from '../route-spec.js';
import type { ConsoleSignIn } from '../../services/console/console-sign-in.js';

export interface ConsoleRoutesOptions {
  signIn: ConsoleSignIn;
  /** CONSOLE: off, the pages and their files answer 404 (the sign-in routes stay, for tools). */
  enabled: boolean;
  publicUrl: () => string;
}

/** The console's pages: one HTML document, which renders the page its path names (docs/console.md). */
const PAGES: Array<{ path: string; operationId: string; summary: string }> = [
  { path: '/', operationId: 'getConsole', summary: 'The web console (HTML): try a kind' },
  { path: '/sign-in', operationId: 'getConsoleSignIn', summary: 'The console\'s sign-in page (a sign-in link carries its one-time code in the fragment)' },
  { path: '/kinds/{kind}', operationId: 'getConsoleKind', summary: 'The console: the form of one kind' },
  { path: '/runs', operationId: 'getConsoleRuns', summary: "The console: the account's runs" },
  { path: '/runs/{run_id}', operationId: 'getConsoleRun', summary: 'The console: one run, live, and what it made' },
  { path: '/account', operationId: 'getConsoleAccount', summary: 'The console: credits, keys, worker tokens, files, tools and bots' },
];

const signInBody = {
  type: 'object',
  additionalProperties: false,
  required: ['code'],
  properties: { code: { type: 'string', minLength: 1, maxLength: 200, description: 'The code of a sign-in link (after `#code=`)' } },
};
const consoleSession = {
  type: 'object',
  required: ['api_key', 'key_id', 'account_id'],
  properties: {
    api_key: { type: 'string', description: 'A new API key of the account, named "console sign-in", shown only now' },
    key_id: { type: 'string' },
    account_id: { type: 'string' },
  },
};
const signInLink = {
  type: 'object',
  required: ['url', 'expires_at'],
  properties: {
    url: { type: 'string', description: 'The link: the console\'s sign-in page with the one-time code in its fragment' },
    expires_at: { type: 'string', format: 'date-time' },
  },
};

export function consoleRoutes({ signIn, enabled, publicUrl }: ConsoleRoutesOptions): RouteSpec[] {
  const assets = new ConsoleAssets();
  const page = async (ctx: Ctx) => {
    if (!enabled) throw new NotFoundError('page');
    if (!assets.built) throw new ApiError('unavailable', 'the console is not built: run `npm run build` (npm install runs it)');
    ctx.set('Content-Security-Policy', CONSOLE_CSP);
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = consolePageHtml({ assets, publicUrl: publicUrl() });
  };
  const file = (name: string) => async (ctx: Ctx) => {
    const asset = enabled ? assets.get(name) : undefined;
    if (!asset) throw new NotFoundError('console file');
    const etag = `"${asset.hash}"`;
    ctx.set('ETag', etag);
    // A link carries the hash of what it names: the bytes under it never change.
    ctx.set('Cache-Control', ctx.query.v === asset.hash ? 'public, max-age=31536000, immutable' : 'no-cache');
    if (ctx.get('If-None-Match') === etag) {
      ctx.status = 304;
      return;
    }
    ctx.type = asset.type;
    ctx.body = asset.body;
  };
  const html = { 200: { description: 'The console page', mediaType: 'text/html', schema: { type: 'string' }, headers: { 'Content-Security-Policy': "default-src 'none'; scripts, styles, media and the API from the gateway only" } }, 404: { description: 'CONSOLE=false' } };
  return [
    ...PAGES.map((p): RouteSpec => ({ method: 'get', ...p, tag: 'console', auth: 'none', responses: html, handler: page })),
    ...[
      { name: 'app.js', operationId: 'getConsoleScript', what: 'script' },
      { name: 'app.css', operationId: 'getConsoleStylesheet', what: 'stylesheet' },
      { name: 'icon.svg', operationId: 'getConsoleIcon', what: 'icon' },
    ].map(({ name, operationId, what }): RouteSpec => ({
      method: 'get',
      path: `/console/${name}`,
      operationId,
      summary: `The console's ${what}`,
      tag: 'console',
      auth: 'none',
      responses: { 200: { description: name, mediaType: '*/*' }, 304: { description: 'Not modified', mediaType: 'none' }, 404: { description: 'CONSOLE=false' } },
      handler: file(name),
    })),
    {
      method: 'get',
      path: '/console/vendor/model-viewer.min.js',
      operationId: 'getConsoleModelViewer',
      summary: "The 3D viewer the console shows meshes in (@google/model-viewer, served by the gateway)",
      tag: 'console',
      auth: 'none',
      responses: { 200: { description: 'The script', mediaType: 'text/javascript' }, 304: { description: 'Not modified', mediaType: 'none' }, 404: { description: 'CONSOLE=false' } },
      handler: file('vendor/model-viewer.min.js'),
    },
    {
      method: 'post',
      path: '/v1/console/sign-in',
      operationId: 'redeemConsoleSignIn',
      summary: 'Trade a one-time sign-in link\'s code for a new API key of its account',
      tag: 'console',
      auth: 'none',
      body: signInBody,
      responses: { 201: { description: 'The new key, shown only now', schema: consoleSession }, 401: { description: 'The code is unknown, used or expired' } },
      async handler(ctx) {
        const { code } = ctx.state.body as { code: string };
        ctx.status = 201;
        ctx.body = await signIn.redeem(code);
      },
    },
    {
      method: 'post',
      path: '/v1/admin/accounts/{account_id}/sign-in-links',
      operationId: 'adminCreateSignInLink',
      summary: 'A one-time console sign-in link for an account',
      tag: 'admin',
      auth: 'admin',
      responses: { 201: { description: 'The link', schema: signInLink }, 404: { description: 'No such account' } },
      async handler(ctx) {
        const { code, expires_at } = await signIn.createCode(ctx.params.account_id);
        ctx.status = 201;
        ctx.body = { url: `${publicUrl()}/sign-in#code=${code}`, expires_at };
      },
    },
  ];
}
