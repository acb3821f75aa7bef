import type { ComfyMessage } from './comfy-socket.js';

/**
 * A prompt's progress over all its nodes, from its WebSocket messages (execution.py, main.py
 * hijack_progress): `execution_cached` names the nodes that will not run, `executing` the node
 * that starts, `progress {value, max, node}` the steps of a long node (a sampler, a mesh
 * decoder). Each node to run is an equal share, the running node counting `value / max` of
 * its share: a sampler's steps move the bar smoothly, and loaders and savers still count.
 * Reports stay below 1 (the outputs are still to be fetched) and never go back.
 */
export class PromptProgress {
  private readonly pending: Set<string>;
  private readonly done = new Set<string>();
  private current: string | null = null;
  private currentFraction = 0;
  private reported = 0;

  constructor(
    nodeIds: string[],
    private readonly report: (p: number, message?: string) => void,
  ) {
    this.pending = new Set(nodeIds);
  }

  onMessage(msg: ComfyMessage): void {
    const d = msg.data;
    if (msg.type === 'execution_cached' && Array.isArray(d.nodes)) {
      for (const id of d.nodes) if (typeof id === 'string') this.pending.delete(id);
      this.emit('cached');
    } else if (msg.type === 'executing' && typeof d.node === 'string') {
      this.finishCurrent();
      this.current = d.node;
      this.currentFraction = 0;
      this.emit(`node ${d.node}`);
    } else if (msg.type === 'progress' && typeof d.value === 'number' && typeof d.max === 'number' && d.max > 0) {
      const node = typeof d.node === 'string' ? d.node : this.current;
      if (node !== null && node !== this.current) {
        this.finishCurrent();
        this.current = node;
      }
      this.currentFraction = Math.min(1, Math.max(0, d.value / d.max));
      this.emit(`node ${node ?? '?'}: ${d.value}/${d.max}`);
    }
  }

  private finishCurrent(): void {
    if (this.current !== null) this.done.add(this.current);
    this.current = null;
  }

  private emit(message: string): void {
    // Nodes ComfyUI runs that the graph did not list (a group node's expansion) widen the total.
    const total = new Set([...this.pending, ...this.done, ...(this.current === null ? [] : [this.current])]).size;
    if (total === 0) return;
    const p = Math.min(0.99, (this.done.size + this.currentFraction) / total);
    if (p <= this.reported) return;
    this.reported = p;
    this.report(p, message);
  }
}
