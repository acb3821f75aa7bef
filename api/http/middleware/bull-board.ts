import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { KoaAdapter } from '@bull-board/koa';
import type { Queue } from 'bullmq';
import type { Middleware } from 'koa';
import { ApiError, UnauthorizedError } from '../../../models/errors.js';
import type { RequestState } from '../context.js';
import { authenticateAdmin } from './authenticate.js';

export const BULL_BOARD_PATH = '/admin/queues';

/**
 * The board loads only what the gateway serves: its scripts, styles and images are all under
 * /admin/queues/static. Inline styles stay allowed (the page's loading screen and the React app
 * use them); inline script does not (the one inline block is JSON data, never run).
 */
export const BULL_BOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'self'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * `<link>` elements to another host: @bull-board/ui's page links Google Fonts, which would
 * make every visit call out and the page wait on a network an operator may not have. Its CSS
 * already falls back to system fonts.
 */
const EXTERNAL_LINK = /<link\b[^>]*\bhref=["']?(?:[a-z][a-z0-9+.-]*:)?\/\/[^>]*>\s*/gi;

/** Browsers prompt for basic credentials only when the 401 names the Basic scheme. */
export const BASIC_CHALLENGE = 'Basic realm="Switchyard admin"';

export interface BullBoardOptions {
  /** Unset: the board is off and its paths answer 404 (nothing to log in to, so no prompt). */
  adminToken: string | undefined;
  /**
   * The deployment's queues, asked at each board request, since model queues appear as jobs
   * name new models: the process's own Queue objects, so the board reuses their connection
   * instead of opening one per queue.
   */
  queues: () => Promise<Queue[]>;
}

/**
 * Bull Board under /admin/queues (page, static assets and its JSON API alike), behind
 * ADMIN_TOKEN as a bearer or as basic auth with user `admin`. Read-only: the run record is the
 * source of truth, and the board's actions (remove, retry, clean, empty, add) would change
 * BullMQ jobs behind it, e.g. a removed waiting job leaves its run queued with credits reserved.
 */
export function bullBoard(opts: BullBoardOptions): Middleware<RequestState> {
  const under = (path: string) => path === BULL_BOARD_PATH || path.startsWith(`${BULL_BOARD_PATH}/`);
  if (!opts.adminToken) {
    return async (ctx, next) => {
      if (!under(ctx.path)) return next();
      throw new ApiError('not_found', 'the queue board is off: set ADMIN_TOKEN to enable it');
    };
  }
  const admin = authenticateAdmin(opts.adminToken);
  const board = mountBoard();
  return async (ctx, next) => {
    if (!under(ctx.path)) return next();
    try {
      await admin(ctx, async () => {});
    } catch (err) {
      // The operator API's check, but its Bearer challenge would not make a browser ask.
      if (err instanceof UnauthorizedError) throw new ApiError('unauthorized', err.message, { headers: { 'WWW-Authenticate': BASIC_CHALLENGE } });
      throw err;
    }
    // Basic credentials ride along on cross-site form posts too; a read-only board needs no other method.
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      throw new ApiError('method_not_allowed', 'the queue board is read-only', { headers: { Allow: 'GET, HEAD' } });
    }
    await board.refresh(await opts.queues());
    await board.middleware(ctx as never, next);
    ctx.set('Content-Security-Policy', BULL_BOARD_CSP);
    if (typeof ctx.body === 'string' && ctx.response.is('html')) ctx.body = ctx.body.replace(EXTERNAL_LINK, '');
  };
}

/** @bull-board/koa mounts its own Koa app (koa-mount); it is built for Koa 3 and @koa/router 15. */
function mountBoard() {
  const server = new KoaAdapter().setBasePath(BULL_BOARD_PATH);
  const { addQueue } = createBullBoard({ queues: [], serverAdapter: server, options: { uiConfig: { boardTitle: 'Switchyard queues' } } });
  const shown = new Set<string>();
  return {
    middleware: server.registerPlugin(),
    /** Adds the queues the board does not show yet (a model's queue made since the last request). */
    refresh(queues: Queue[]): void {
      for (const queue of queues) {
        if (shown.has(queue.name)) continue;
        shown.add(queue.name);
        addQueue(new BullMQAdapter(queue, { readOnlyMode: true }));
      }
    },
  };
}
