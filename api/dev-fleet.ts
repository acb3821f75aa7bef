import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { SwitchyardWorker, consoleLogger } from '../sdk/worker/index.js';
import type { Gateway } from './gateway.js';
import { issueWorkerToken } from './services/worker-tokens.js';

/**
 * The demo fleet of `npm run dev`: one trusted worker running the demo engine for every kind,
 * so a job submitted from the quick start finishes with a real, downloadable artifact.
 * Trusted, so it serves open and trusted jobs; private jobs need an attested worker.
 */
export async function startDevFleet(gateway: Gateway, url: string, delayMs: number): Promise<SwitchyardWorker> {
  const operator = await gateway.stores.operators.create({ name: 'dev demo fleet', trust: 'trusted' });
  const { token } = await issueWorkerToken(gateway.stores.workerTokens, { type: 'operator', id: operator.id }, 'trusted');
  const worker = new SwitchyardWorker({
    gateway: url,
    token,
    kinds: 'all',
    tier: 'trusted',
    slots: 4,
    handler: createDemoEngine({ delayMs }),
    logger: consoleLogger('warn'),
    // Listed by GET /v1/models: the model OpenAI-compatible clients name.
    software: { name: 'switchyard-demo-fleet', models: ['demo-llm'] },
  });
  await worker.start();
  return worker;
}
