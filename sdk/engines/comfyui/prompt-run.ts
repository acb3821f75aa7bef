import type { EngineContext } from '../types.js';
import { UpstreamError } from '../upstream-error.js';
import type { ComfyClient, HistoryEntry } from './comfy-client.js';
import type { ComfyMessage, ComfySocket } from './comfy-socket.js';
import { PromptProgress } from './prompt-progress.js';
import type { ApiGraph } from './workflow-templates.js';

/**
 * One prompt of one lease, queued and followed to its end in ComfyUI's order (execution.py
 * execute_async, main.py prompt_worker): `execution_start`, `execution_cached`, per node
 * `executing` and `progress`, `executed`; then `execution_success` or `execution_error` /
 * `execution_interrupted`; then the history is written and `executing {node: null}` says the
 * prompt is over. Only that last message means the history can be read.
 */
export async function runPrompt(client: ComfyClient, socket: ComfySocket, graph: ApiGraph, ctx: EngineContext): Promise<{ promptId: string; history: HistoryEntry }> {
  ctx.signal.throwIfAborted();
  // Open before queueing: ComfyUI sends a prompt's messages only to a socket connected at the time.
  const conn = await socket.connect();
  const { prompt_id: promptId, node_errors } = await client.queuePrompt(graph, socket.clientId);
  // Some outputs refused, others queued: ComfyUI runs those that passed.
  if (node_errors && typeof node_errors === 'object' && Object.keys(node_errors).length) ctx.log(`ComfyUI left out outputs that failed validation: ${JSON.stringify(node_errors).slice(0, 500)}`);
  ctx.log(`ComfyUI prompt ${promptId} queued`);

  let running = false;
  const cancel = async () => {
    // /interrupt stops whatever runs on older servers: sent only while ours is the one running.
    if (running) await client.interrupt(promptId);
    await client.deleteQueued(promptId);
  };

  const progress = new PromptProgress(Object.keys(graph), ctx.progress);
  const ended = await new Promise<'done' | 'aborted'>((resolve, reject) => {
    let settled = false;
    let unwatch: (() => void) | null = null;
    const settle = (then: () => void) => {
      if (settled) return;
      settled = true;
      unwatch?.();
      ctx.signal.removeEventListener('abort', onAbort);
      then();
    };
    const onAbort = () => settle(() => resolve('aborted'));
    const onMessage = (msg: ComfyMessage) => {
      const d = msg.data;
      switch (msg.type) {
        case 'execution_start':
          running = true;
          break;
        case 'executing':
          if (d.node === null || d.node === undefined) settle(() => resolve('done'));
          else running = true;
          break;
        case 'execution_error':
          settle(() => reject(new UpstreamError('upstream_failed', `ComfyUI failed prompt ${promptId}: ${describeExecutionError(d)}`, true)));
          return;
        case 'execution_interrupted':
          // Not ours (we stop watching before we interrupt): someone interrupted it at the server.
          settle(() => reject(new UpstreamError('upstream_failed', `ComfyUI interrupted prompt ${promptId} at node ${d.node_id ?? '?'} (${d.node_type ?? '?'}): POST /interrupt from another client`, true)));
          return;
      }
      progress.onMessage(msg);
    };
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    // The messages kept from before POST /prompt answered are replayed within watch(): a prompt
    // ComfyUI had all cached can be over before the answer came, and settle during the call.
    unwatch = conn.watch(promptId, { message: onMessage, closed: (err) => settle(() => reject(err)) });
    if (settled) unwatch();
    else if (ctx.signal.aborted) onAbort();
  });

  if (ended === 'aborted') {
    await cancel().catch((err: Error) => ctx.log(`could not cancel ComfyUI prompt ${promptId}: ${err.message}`));
    throw ctx.signal.reason;
  }
  const history = await client.history(promptId);
  if (!history) throw new UpstreamError('upstream_bad_response', `ComfyUI has no history of prompt ${promptId} after running it`, true);
  if (history.status?.status_str === 'error') throw new UpstreamError('upstream_failed', `ComfyUI failed prompt ${promptId}: ${describeStatusMessages(history.status.messages)}`, true);
  return { promptId, history };
}

/** `execution_error`'s data (execution.py handle_execution_error): where and what. */
export function describeExecutionError(d: Record<string, unknown>): string {
  const what = [d.exception_type, d.exception_message].filter((s) => typeof s === 'string' && s.trim() !== '').map((s) => (s as string).trim());
  return `node ${d.node_id ?? '?'} (${d.node_type ?? '?'}) raised ${what.join(': ') || 'an error'}`.slice(0, 2000);
}

/** The history's status messages `[event, data]`: the execution_error among them, if any. */
function describeStatusMessages(messages: unknown[] | undefined): string {
  const error = (messages ?? []).find((m): m is [string, Record<string, unknown>] => Array.isArray(m) && m[0] === 'execution_error' && typeof m[1] === 'object' && m[1] !== null);
  return error ? describeExecutionError(error[1]) : 'its history says error';
}
