import { randomUUID } from 'node:crypto';
import WebSocket, { type RawData } from 'ws';
import { UpstreamError } from '../upstream-error.js';

/**
 * The worker's one WebSocket to ComfyUI (`/ws?clientId=`), shared by all its leases: ComfyUI
 * sends a prompt's messages to the socket of the client_id it was queued with (server.py
 * send_json with sid), each carrying its `prompt_id`, so one socket serves every running prompt
 * and the messages are handed to the lease that queued each prompt. One socket rather than one
 * per lease: ComfyUI runs one prompt at a time anyway, and a socket per queued prompt would sit
 * idle for the whole queue.
 *
 * A prompt's first messages may arrive before POST /prompt has answered with its id, so
 * messages of prompts nobody watches yet are kept (a bounded number) and replayed to the watcher.
 * When the socket closes, every watcher is told (the server went away: their leases fail
 * retryable) and the next lease opens a new one.
 */

export interface ComfyMessage {
  type: string;
  data: Record<string, unknown>;
}

export interface PromptWatcher {
  message(msg: ComfyMessage): void;
  closed(err: UpstreamError): void;
}

/** Messages kept for prompts nobody watches yet, oldest dropped first. */
const MAX_KEPT = 1000;

export class ComfyConnection {
  private readonly watchers = new Map<string, PromptWatcher>();
  private readonly kept: Array<{ promptId: string; msg: ComfyMessage }> = [];
  private closedWith: UpstreamError | null = null;

  constructor(private readonly ws: WebSocket, url: string) {
    ws.on('message', (data: RawData, isBinary: boolean) => {
      // Binary frames are previews (BinaryEventTypes): not ours to read.
      if (isBinary) return;
      let msg: unknown;
      try {
        msg = JSON.parse(data.toString());
      } catch {
        return;
      }
      if (typeof msg !== 'object' || msg === null) return;
      const { type, data: body } = msg as { type?: unknown; data?: unknown };
      if (typeof type !== 'string' || typeof body !== 'object' || body === null) return;
      const promptId = (body as Record<string, unknown>).prompt_id;
      // `status` (queue size) and the like concern no prompt.
      if (typeof promptId !== 'string') return;
      const m = { type, data: body as Record<string, unknown> };
      const watcher = this.watchers.get(promptId);
      if (watcher) watcher.message(m);
      else {
        this.kept.push({ promptId, msg: m });
        if (this.kept.length > MAX_KEPT) this.kept.shift();
      }
    });
    ws.on('close', (code: number) => {
      this.closedWith = new UpstreamError('upstream_unavailable', `the WebSocket to ComfyUI at ${url} closed (code ${code}) before the prompt finished: the server went away`, true);
      const watchers = [...this.watchers.values()];
      this.watchers.clear();
      for (const w of watchers) w.closed(this.closedWith);
    });
  }

  get open(): boolean {
    return this.closedWith === null;
  }

  /** Hands `promptId`'s messages (those kept first) to `watcher` until the returned function is called. */
  watch(promptId: string, watcher: PromptWatcher): () => void {
    if (this.closedWith) {
      const err = this.closedWith;
      queueMicrotask(() => watcher.closed(err));
      return () => {};
    }
    this.watchers.set(promptId, watcher);
    const mine = this.kept.filter((k) => k.promptId === promptId);
    if (mine.length) {
      this.kept.splice(0, this.kept.length, ...this.kept.filter((k) => k.promptId !== promptId));
      for (const k of mine) if (this.watchers.get(promptId) === watcher) watcher.message(k.msg);
    }
    return () => {
      if (this.watchers.get(promptId) === watcher) this.watchers.delete(promptId);
    };
  }

  close(): void {
    this.ws.terminate();
  }
}

export class ComfySocket {
  /** Sent as `client_id` with every prompt, so that ComfyUI sends their messages to this socket. */
  readonly clientId = randomUUID().replaceAll('-', '');
  private current: Promise<ComfyConnection> | null = null;

  constructor(
    /** The server's base http(s) URL, without a trailing slash. */
    private readonly base: string,
  ) {}

  /** The open connection, opened (again) if there is none. */
  async connect(): Promise<ComfyConnection> {
    const pending = this.current;
    if (pending) {
      const conn = await pending.catch(() => null);
      if (conn?.open) return conn;
      if (this.current === pending) this.current = null;
    }
    this.current ??= this.open();
    return this.current;
  }

  private open(): Promise<ComfyConnection> {
    const url = `${this.base.replace(/^http/, 'ws')}/ws?clientId=${this.clientId}`;
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { handshakeTimeout: 30_000 });
      const fail = (err: Error) => {
        const e = err as Error & { code?: string };
        reject(new UpstreamError('upstream_unavailable', `the WebSocket to ComfyUI at ${this.base} could not be opened: ${e.code ?? e.message}`, true));
      };
      ws.once('error', fail);
      ws.once('open', () => {
        ws.off('error', fail);
        // Errors after the opening end in 'close', which the connection reports.
        ws.on('error', () => {});
        resolve(new ComfyConnection(ws, this.base));
      });
    });
  }

  async close(): Promise<void> {
    const pending = this.current;
    this.current = null;
    const conn = await pending?.catch(() => null);
    conn?.close();
  }
}
