/** The path of the gateway's worker WebSocket: the gateway answers upgrades there, workers dial it. */
export const WORKER_PATH = '/v1/workers/connect';

/** The gateway's WebSocket URL for a base URL: http -> ws, https -> wss, plus /v1/workers/connect. */
export function workerSocketUrl(gateway: string): string {
  let url: URL;
  try {
    url = new URL(gateway);
  } catch {
    throw new TypeError(`the gateway URL ${JSON.stringify(gateway)} is not a URL`);
  }
  const schemes: Record<string, string> = { 'http:': 'ws:', 'https:': 'wss:', 'ws:': 'ws:', 'wss:': 'wss:' };
  const scheme = schemes[url.protocol];
  if (!scheme) throw new TypeError(`the gateway URL must be http(s):// (or ws(s)://), not ${url.protocol}`);
  url.protocol = scheme;
  if (!url.pathname.endsWith(WORKER_PATH)) url.pathname = url.pathname.replace(/\/+$/, '') + WORKER_PATH;
  url.search = '';
  url.hash = '';
  return url.toString();
}
