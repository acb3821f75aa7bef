import net, { type AddressInfo } from 'node:net';
import { createDemoEngine } from '../../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger } from '../../sdk/worker/index.js';
import { TestGateway, cleanupPrefix } from './harness.js';

/**
 * A TCP proxy to the gateway that cuts every events connection sent without Last-Event-ID in
 * the middle of its first `progress` frame (the bytes before it pass, then both sockets are
 * destroyed). A reconnect carries Last-Event-ID and passes whole, so each stream is cut once,
 * whatever the number of client tests that use the proxy.
 */
export class CuttingProxy {
  cuts = 0;
  private readonly open = new Set<net.Socket>();
  private readonly server = net.createServer((client) => this.pipe(client));

  constructor(private readonly targetPort: number) {}

  async start(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private pipe(client: net.Socket): void {
    const upstream = net.connect(this.targetPort, '127.0.0.1');
    this.open.add(client);
    client.once('close', () => this.open.delete(client));
    let armed = false;
    let seen = ''; // latin1, so string offsets are byte offsets
    client.on('data', (d: Buffer) => {
      const head = d.toString('latin1');
      if (/^GET \/v1\/jobs\/[^ ]+\/events/.test(head)) armed = !/\r\nlast-event-id:/i.test(head.split('\r\n\r\n')[0]);
      upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (!armed) return void client.write(d);
      const before = seen.length;
      seen += d.toString('latin1');
      const at = seen.indexOf('event: progress');
      if (at < 0) return void client.write(d);
      armed = false;
      this.cuts++;
      client.write(d.subarray(0, Math.max(0, at + 8 - before)), () => {
        client.destroy();
        upstream.destroy();
      });
    });
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  }

  async stop(): Promise<void> {
    for (const s of this.open) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

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
    this.gw = await new TestGateway(this.prefix, { FILE_MAX_BYTES: `${CLIENT_FILE_MAX_BYTES}b`, FILE_QUOTA_BYTES: `${CLIENT_FILE_QUOTA_BYTES}b` }).start();
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
    this.proxy = new CuttingProxy(Number(new URL(this.gw.url).port));
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
