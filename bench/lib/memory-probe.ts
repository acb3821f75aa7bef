import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import { answerRequests } from './ipc-child.js';

/**
 * Preloaded (`--expose-gc --import`) into a server child that the benchmark measures, so the
 * parent can read its memory without changing the server: `memory` runs full GCs first when
 * asked, then answers process.memoryUsage(); `heap-snapshot` writes one into a directory.
 */
const gc = (globalThis as { gc?: () => void }).gc;

answerRequests({
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
