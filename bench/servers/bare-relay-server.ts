import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

/**
 * The reference for the stream benchmark: the least a server can do to relay streamed tokens
 * from WebSocket producers to HTTP clients as OpenAI chunks. Plain node:http and `ws`, no
 * framework, auth, queue, persistence or pings. Producers (bench/servers/bare-relay-producer.ts)
 * connect to /producer; `POST /v1/chat/completions` reads the JSON body, hands
 * `{"id", "tokens": max_tokens}` to the next producer round-robin, answers text/event-stream
 * (with setNoDelay, as the gateway) and writes a role chunk, then one `chat.completion.chunk`
 * per `{"id", "d"}` message, then a finish chunk and `data: [DONE]` on `{"id", "end": true}`.
 * GET /producers answers how many producers are connected. Prints {"url"} once listening; SIGTERM stops it.
 */
const producers: WebSocket[] = [];
const streams = new Map<number, { res: http.ServerResponse; meta: { id: string; object: string; created: number; model: string } }>();
let next = 0;
let ids = 0;

const chunk = (meta: object, delta: object, finish: string | null = null) => `data: ${JSON.stringify({ ...meta, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

const server = http.createServer({ requestTimeout: 0 }, async (req, res) => {
  if (req.method === 'GET' && req.url === '/producers') return void res.end(String(producers.length));
  if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return void res.writeHead(404).end();
  let raw = '';
  for await (const c of req) raw += c;
  const body = JSON.parse(raw) as { model: string; max_tokens?: number };
  if (producers.length === 0) return void res.writeHead(503).end();
  const id = ++ids;
  const meta = { id: `chatcmpl-${id}`, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: body.model };
  res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
  res.socket?.setNoDelay(true);
  res.write(chunk(meta, { role: 'assistant', content: '' }));
  streams.set(id, { res, meta });
  res.once('close', () => streams.delete(id));
  producers[next++ % producers.length].send(JSON.stringify({ id, tokens: body.max_tokens ?? 16 }));
});

const wss = new WebSocketServer({ server, path: '/producer' });
wss.on('connection', (ws) => {
  producers.push(ws);
  ws.on('close', () => producers.splice(producers.indexOf(ws), 1));
  ws.on('message', (data) => {
    const m = JSON.parse(String(data)) as { id: number; d?: string; end?: boolean };
    const s = streams.get(m.id);
    if (!s) return;
    if (m.end) {
      s.res.end(`${chunk(s.meta, {}, 'length')}data: [DONE]\n\n`);
      streams.delete(m.id);
    } else s.res.write(chunk(s.meta, { content: m.d }));
  });
});

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
});

process.once('SIGTERM', () => {
  for (const ws of wss.clients) ws.terminate();
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
