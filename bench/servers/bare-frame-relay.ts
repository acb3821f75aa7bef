import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { MAX_FRAME_BYTES } from '../../sdk/protocol/index.js';

/**
 * The reference for the ranks benchmark: the least a server can do to carry binary WebSocket
 * messages from one client to another. Plain node:http and `ws` (no permessage-deflate, the
 * gateway worker socket's `maxPayload`), no auth, no parsing of the frames and no header
 * rewrite. A client connects to /a or /b; each binary message from /a goes to the
 * socket of /b as it is, and the other way round.
 *
 * It applies the gateway's back-pressure rule and nothing more (RANK_BUFFER_BYTES, 4 MiB by
 * default, as dispatch/pipelines/frame-router.ts): past that many bytes handed to a receiver's
 * socket and not yet written, the sender's socket stops being read until half is out. Without
 * it a fast sender would only fill this process's memory, and the two paths would not be
 * comparable. Prints {"url"} once listening; SIGTERM stops it.
 */
const bufferBytes = Number(process.env.RANK_BUFFER_BYTES ?? 4 * 1024 * 1024);
const sockets: Record<'a' | 'b', WebSocket | undefined> = { a: undefined, b: undefined };
/** Per receiving side: bytes handed to its socket and not yet written. */
const inflight = { a: 0, b: 0 };
const paused = { a: false, b: false };

const other = (side: 'a' | 'b') => (side === 'a' ? 'b' : 'a');

const server = http.createServer((_req, res) => res.writeHead(404).end());
const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
server.on('upgrade', (req, socket, head) => {
  const side = req.url === '/a' ? 'a' : req.url === '/b' ? 'b' : undefined;
  if (!side) return void socket.destroy();
  wss.handleUpgrade(req, socket, head, (ws) => {
    sockets[side] = ws;
    ws.on('close', () => sockets[side] === ws && (sockets[side] = undefined));
    ws.on('message', (data: Buffer, isBinary) => {
      const to = other(side);
      const dest = sockets[to];
      if (!isBinary || !dest) return;
      const n = data.length;
      inflight[to] += n;
      if (inflight[to] > bufferBytes && !paused[side]) {
        paused[side] = true;
        ws.pause();
      }
      dest.send(data, { binary: true }, () => {
        inflight[to] -= n;
        if (paused[side] && inflight[to] <= bufferBytes / 2) {
          paused[side] = false;
          ws.resume();
        }
      });
    });
  });
});

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
});

process.once('SIGTERM', () => {
  for (const ws of wss.clients) ws.terminate();
  server.close(() => process.exit(0));
});
