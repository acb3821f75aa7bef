// A worker process that takes leases and never finishes them, so a test can kill -9 it mid-job.
// argv: gateway URL, worker token, slots. Prints one JSON line per frame it receives.
import { RawWorker } from './raw-worker.js';

const [url, token, slots] = process.argv.slice(2);
const worker = new RawWorker(url, token);
await worker.connect({ slots: Number(slots ?? 1), kinds: ['inference:image:generate'] });
console.log(JSON.stringify({ type: 'registered', worker_id: worker.workerId }));
for (;;) {
  const lease = await worker.lease(3_600_000);
  console.log(JSON.stringify(lease));
}
