import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';

/**
 * The ceiling for the submit benchmark: Koa alone, one POST route that reads and parses the
 * JSON body (so it does the request work every JSON API does) and answers a constant 202 of
 * about the size of the gateway's. No router, auth, validation or Redis.
 */
const ACCEPTED = JSON.stringify({
  run_id: 'run_01J0000000000000000000000',
  kind: 'inference:image:generate',
  status: 'queued',
  confidentiality: 'open',
  class: 'standard',
  priority: 20,
  created_at: '2025-01-01T00:00:00.000Z',
});

async function readJson(req: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

const app = new Koa();
app.use(async (ctx) => {
  if (ctx.method !== 'POST' || ctx.path !== '/v1/jobs') {
    ctx.status = 404;
    return;
  }
  await readJson(ctx.req);
  ctx.status = 202;
  ctx.type = 'application/json';
  ctx.body = ACCEPTED;
});

// Same server options as the gateway, so keep-alive behaves the same.
const server = http.createServer({ requestTimeout: 30_000, headersTimeout: 20_000, keepAliveTimeout: 65_000 }, app.callback());
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
});

process.once('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
