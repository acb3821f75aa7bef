import { SwitchyardWorker } from '../../sdk/worker/index.js';
import { silentLogger } from '../../sdk/worker/logger.js';
import type { EngineContext, EngineResult } from '../../sdk/worker/index.js';

/**
 * A worker of the LLM kind whose every step waits for the test: a test names a gate
 * (`open('more')`) and the handler, told by the job's prompt what to do, goes on only once it
 * is open. So a test sees a run mid-way (partial text, some log lines) by a condition it
 * controls, never by a sleep.
 */
export const LLM = 'inference:llm:text-generate';

export class PacedWorker {
  worker!: SwitchyardWorker;
  private readonly gates = new Map<string, { promise: Promise<void>; open: () => void }>();

  private gate(name: string) {
    let g = this.gates.get(name);
    if (!g) {
      let open!: () => void;
      const promise = new Promise<void>((r) => (open = r));
      g = { promise, open };
      this.gates.set(name, g);
    }
    return g;
  }

  /** Lets the handlers waiting at `name` go on (and any that reach it later). */
  open(name: string): void {
    this.gate(name).open();
  }

  private wait(name: string, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const abort = () => reject(Object.assign(new Error('aborted'), { name: 'AbortError' }));
      if (signal.aborted) return abort();
      signal.addEventListener('abort', abort, { once: true });
      void this.gate(name).promise.then(resolve);
    });
  }

  async start(gateway: string, token: string): Promise<this> {
    this.worker = new SwitchyardWorker({ gateway, token, kinds: [LLM], slots: 8, logger: silentLogger, handler: (_kind, input, ctx) => this.handle(String(input.prompt), ctx) });
    await this.worker.start();
    return this;
  }

  async stop(): Promise<void> {
    await this.worker?.stop({ timeoutMs: 0 });
  }

  /** What each prompt makes the worker do. */
  private async handle(prompt: string, ctx: EngineContext): Promise<EngineResult> {
    const done = (text: string): EngineResult => ({ artifacts: [], extra: { text }, usage: { input_tokens: prompt.length, output_tokens: text.split(' ').length } });
    switch (prompt) {
      case 'stream': {
        ctx.progress(0.25, 'writing');
        ctx.output('Once upon');
        ctx.output(' a time');
        await this.wait('stream-rest', ctx.signal);
        ctx.output(' the end.');
        return done('Once upon a time the end.');
      }
      case 'lines': {
        for (let i = 1; i <= 5; i++) ctx.log(`line ${i}`);
        await this.wait('lines-more', ctx.signal);
        for (let i = 6; i <= 10; i++) ctx.log(`line ${i}`);
        await this.wait('lines-end', ctx.signal);
        for (let i = 11; i <= 15; i++) ctx.log(`line ${i}`);
        return done('fifteen lines');
      }
      case 'hold':
        ctx.log('holding until canceled');
        await this.wait('never', ctx.signal);
        return done('unreachable');
      case 'fail':
        throw Object.assign(new Error('the prompt asks for the impossible'), { code: 'invalid_input', retryable: false });
      default:
        ctx.progress(1, 'finished');
        ctx.log('answered at once');
        ctx.output('Hi there');
        return done('Hi there');
    }
  }
}
