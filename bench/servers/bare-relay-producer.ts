import WebSocket from 'ws';

/**
 * The token source of the stream benchmark's bare relay: PRODUCERS WebSocket connections to
 * RELAY_URL (ws://.../producer), each answering `{"id", "tokens"}` with that many `{"id", "d"}`
 * messages of one word each, sent in one burst (as the demo llm with no delay calls
 * ctx.output), then `{"id", "end": true}`. The relay's GET /producers counts the open ones; SIGTERM stops this.
 */
const url = process.env.RELAY_URL;
if (!url) throw new Error('bare-relay-producer: RELAY_URL is required');
const count = Number(process.env.PRODUCERS ?? '8');

const sockets = await Promise.all(
  Array.from({ length: count }, () => new Promise<WebSocket>((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
    ws.on('message', (data) => {
      const { id, tokens } = JSON.parse(String(data)) as { id: number; tokens: number };
      for (let i = 0; i < tokens; i++) ws.send(JSON.stringify({ id, d: i === 0 ? 'w0' : ` w${i}` }));
      ws.send(JSON.stringify({ id, end: true }));
    });
  })),
);

process.once('SIGTERM', () => {
  for (const ws of sockets) ws.close();
  process.exit(0);
});
