import path from 'node:path';
import { constants, monitorEventLoopDelay, PerformanceObserver, type IntervalHistogram } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import { answerRequests } from './ipc-child.js';

/**
 * Preloaded (`--expose-gc --import`) into a server child that the benchmark measures, so the
 * parent can read its memory without changing the server: `memory` runs full GCs first when
 * asked, then answers process.memoryUsage(); `heap-snapshot` writes one into a directory;
 * `loop-start` and `loop-stop` bracket a window and answer its event-loop delay (p50, p99, max)
 * and its GC pauses (count, total, longest), to tell a slow path from a stalled loop.
 */
const gc = (globalThis as { gc?: () => void }).gc;

let loop: { delay: IntervalHistogram; gc: PerformanceObserver; pauses: Array<{ ms: number; kind: string }> } | undefined;

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'scavenge',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'mark-compact',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental marking',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak callbacks',
};

answerRequests({
  'loop-start'() {
    loop?.delay.disable();
    loop?.gc.disconnect();
    const pauses: Array<{ ms: number; kind: string }> = [];
    const gc = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) pauses.push({ ms: e.duration, kind: GC_KINDS[(e as { detail?: { kind?: number } }).detail?.kind ?? -1] ?? 'other' });
    });
    gc.observe({ entryTypes: ['gc'] });
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    loop = { delay, gc, pauses };
    return {};
  },
  'loop-stop'() {
    if (!loop) throw new Error('memory probe: loop-stop before loop-start');
    const { delay, gc, pauses } = loop;
    delay.disable();
    gc.disconnect();
    loop = undefined;
    const ms = (ns: number) => ns / 1e6;
    return {
      delayP50Ms: ms(delay.percentile(50)),
      delayP99Ms: ms(delay.percentile(99)),
      delayMaxMs: ms(delay.max),
      gcCount: pauses.length,
      gcTotalMs: pauses.reduce((a, b) => a + b.ms, 0),
      gcMaxMs: Math.max(0, ...pauses.map((p) => p.ms)),
      gcMaxKind: pauses.reduce((a, b) => (b.ms > a.ms ? b : a), { ms: -1, kind: '-' }).kind,
      gcMarkCompacts: pauses.filter((p) => p.kind === 'mark-compact').length,
    };
  },
  async memory(req) {
    if (req.gc) {
      if (!gc) throw new Error('memory probe: start the child with --expose-gc');
      // Twice with a pause: the first pass can leave weak callbacks and finalizers to a second.
      gc();
      await sleep(50);
      gc();
    }
    return process.memoryUsage();
  },
  'heap-snapshot'(req) {
    return { file: v8.writeHeapSnapshot(path.join(String(req.dir), `sse-${process.pid}-${Date.now()}.heapsnapshot`)) };
  },
});
