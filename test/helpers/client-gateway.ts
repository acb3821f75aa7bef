import { createDemoEngine } from '../../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger } from '../../sdk/worker/index.js';
import { CuttingProxy } from './cutting-proxy.js';
import { TestGateway, cleanupPrefix } from './harness.js';

// Small limits, so client tests can meet 413 and 409 quota_exceeded on uploads quickly.
export const CLIENT_FILE_MAX_BYTES = 64 * 1024;
export const CLIENT_FILE_QUOTA_BYTES = 160 * 1024;

/**
 * What the test suites of the client libraries (sdk/go, sdk/python) run against: a real
 * gateway with small file limits, demo workers for every kind (open tier), an account with
 * plenty of credits, a poor one (one credit, no files) and a cutting proxy. `env` holds the
 * SWITCHYARD_TEST_* variables the suites read.
 */
export class ClientTestGateway {
  gw?: TestGateway;
  worker?: SwitchyardWorker;
  proxy?: CuttingProxy;
  key = '';
  env: Record<string, string> = {};

  constructor(readonly prefix: string, readonly name: string) {}

  get url(): string {
    return this.gw!.url;
  }

  async start(): Promise<this> {
    // One partition a queue, whatever the run sets: the suites check a
    // listing's exact queue positions, which are estimates across partitions (docs/architecture.md;
    // the gateway's own tests, jobs-listing and queue-partitions, cover those).
    const env = { FILE_MAX_BYTES: `${CLIENT_FILE_MAX_BYTES}b`, FILE_QUOTA_BYTES: `${CLIENT_FILE_QUOTA_BYTES}b`, QUEUE_PARTITIONS: '1' };
    this.gw = await new TestGateway(this.prefix, env).start();
    ({ key: this.key } = await this.gw.account(100_000, this.name));
    // One credit: less than any kind but the llm's, and no files yet, for 402 and the quota.
    const { key: poorKey } = await this.gw.account(1, `${this.name}-poor`);
    // Long enough for a stream to see progress frames (quarter steps), short for the suite.
    this.worker = new SwitchyardWorker({
      gateway: this.gw.url,
      token: await this.gw.accountWorkerToken(this.key),
      kinds: 'all',
      slots: 4,
      handler: createDemoEngine({ delayMs: 400, espeakNg: null, pocketsphinx: null }),
      logger: silentLogger,
      progressIntervalMs: 0,
    });
    await this.worker.start();
    this.proxy = new CuttingProxy(Number(new URL(this.gw.url).port), 'fresh');
    const proxyUrl = await this.proxy.start();
    this.env = {
      SWITCHYARD_TEST_URL: this.gw.url,
      SWITCHYARD_TEST_KEY: this.key,
      SWITCHYARD_TEST_POOR_KEY: poorKey,
      SWITCHYARD_TEST_PROXY_URL: proxyUrl,
      SWITCHYARD_TEST_FILE_MAX_BYTES: String(CLIENT_FILE_MAX_BYTES),
      SWITCHYARD_TEST_QUOTA_BYTES: String(CLIENT_FILE_QUOTA_BYTES),
    };
    return this;
  }

  async stop(): Promise<void> {
    await this.worker?.stop({ timeoutMs: 0 });
    await this.proxy?.stop();
    await this.gw?.stop();
    await cleanupPrefix(this.prefix);
  }
}
