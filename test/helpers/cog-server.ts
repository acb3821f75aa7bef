import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * A stand-in for a Cog container's HTTP server, written from Cog's docs/http.md (replicate/cog) and
 * its server, crates/coglet/src/transport/http/routes.rs (request and response bodies, status
 * codes) and crates/coglet/src/prediction.rs (the prediction object sent to webhooks). The
 * model's behaviour is a script the test gives per prediction, so each test drives one case.
 */

/** What a script does, step by step: print (stdout, into `logs`), yield an output, wait, fail. */
export type Step = { log: string } | { yield: unknown } | { wait: Promise<void> } | { fail: string };
export interface Script {
  steps: Step[];
  /** The return value of a model that returns (not yields); unset: the yielded list. */
  output?: unknown;
}

export interface Recorded {
  id: string;
  input: Record<string, unknown>;
  headers: http.IncomingHttpHeaders;
  webhook?: string;
}

export type Health = 'STARTING' | 'READY' | 'BUSY' | 'SETUP_FAILED' | 'DEFUNCT' | 'UNHEALTHY';

interface Prediction {
  id: string;
  status: 'starting' | 'processing' | 'succeeded' | 'failed' | 'canceled';
  input: Record<string, unknown>;
  logs: string;
  outputs: unknown[];
  output?: unknown;
  error?: string;
  canceled: boolean;
  wake: () => void;
}

/** An image model's Input, as `cog build` writes it for:
 *  run(prompt: str = Input(description=...), image: Path = Input(...), steps: int = Input(default=20, ge=1, le=50),
 *      scheduler: str = Input(default="K_EULER", choices=[...]), seed: Optional[int] = Input(default=None),
 *      mask: Path = Input(default=None), guidance: float = Input(default=7.5, ge=1, le=20)) -> Iterator[Path]
 *  (pkg/schema/openapi_spec.go: choices as allOf/$ref to an enum component named after the input). */
export function imageModelSchema(): Record<string, unknown> {
  return {
    openapi: '3.0.2',
    info: { title: 'Cog', version: '0.1.0' },
    paths: {},
    components: {
      schemas: {
        Input: {
          type: 'object',
          title: 'Input',
          required: ['prompt', 'image'],
          properties: {
            seed: { type: 'integer', title: 'Seed', nullable: true, 'x-order': 4, description: 'Random seed; leave blank to randomize' },
            image: { type: 'string', title: 'Image', format: 'uri', 'x-order': 1, description: 'The first frame' },
            mask: { type: 'string', title: 'Mask', format: 'uri', nullable: true, 'x-order': 5 },
            steps: { type: 'integer', title: 'Steps', default: 20, minimum: 1, maximum: 50, 'x-order': 2 },
            prompt: { type: 'string', title: 'Prompt', 'x-order': 0, description: 'What to show' },
            guidance: { type: 'number', title: 'Guidance', default: 7.5, minimum: 1, maximum: 20, 'x-order': 6 },
            scheduler: { allOf: [{ $ref: '#/components/schemas/scheduler' }], default: 'K_EULER', 'x-order': 3, description: 'The sampler' },
          },
        },
        scheduler: { title: 'scheduler', description: 'An enumeration.', enum: ['DDIM', 'K_EULER', 'DPMSolverMultistep'], type: 'string' },
        Output: { type: 'array', title: 'Output', items: { type: 'string', format: 'uri' }, 'x-cog-array-type': 'iterator' },
      },
    },
  };
}

/** A language model: run(prompt: str, max_tokens: int = Input(default=128, ge=1)) -> ConcatenateIterator[str]. */
export function textModelSchema(): Record<string, unknown> {
  return {
    openapi: '3.0.2',
    info: { title: 'Tiny LLaMA', version: '0.1.0' },
    paths: {},
    components: {
      schemas: {
        Input: {
          type: 'object',
          title: 'Input',
          required: ['prompt'],
          properties: {
            prompt: { type: 'string', title: 'Prompt', 'x-order': 0 },
            max_tokens: { type: 'integer', title: 'Max Tokens', default: 128, minimum: 1, 'x-order': 1 },
          },
        },
        Output: { type: 'array', title: 'Output', items: { type: 'string' }, 'x-cog-array-type': 'iterator', 'x-cog-array-display': 'concatenate' },
      },
    },
  };
}

export class CogServer {
  health: Health = 'READY';
  setupLogs = '';
  /** The next predictions' scripts, in order; without one a prediction returns "ok". */
  readonly scripts: Script[] = [];
  readonly created: Recorded[] = [];
  readonly cancels: string[] = [];
  healthChecks = 0;
  /** Files the server hands out by URL, as it does when run with --upload-url (Cog's docs/http.md "File uploads"). */
  readonly files = new Map<string, { type: string; data: Buffer }>();
  private readonly predictions = new Map<string, Prediction>();
  private readonly sockets = new Set<Socket>();
  private server = http.createServer((req, res) => void this.route(req, res));
  url = '';

  constructor(readonly openapi: Record<string, unknown>) {
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  /** Listens on `port` (another server's, to stand for a container that came back), or any free one. */
  async start(port = 0): Promise<this> {
    await new Promise<void>((r) => this.server.listen(port, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The container dies: every connection drops and nothing listens any more. */
  async kill(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server.close(r));
  }

  stop = () => this.kill();

  running(): number {
    return [...this.predictions.values()].filter((p) => p.status === 'starting' || p.status === 'processing').length;
  }

  private async route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, body: unknown): void => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.method === 'GET' && path === '/health-check') {
      this.healthChecks++;
      // Cog's docs/http.md "GET /health-check": always 200; BUSY when every slot (one here) is taken.
      const status = this.health === 'READY' && this.running() > 0 ? 'BUSY' : this.health;
      const setupStatus = this.health === 'STARTING' ? 'starting' : this.health === 'SETUP_FAILED' ? 'failed' : 'succeeded';
      return send(200, { status, setup: { started_at: new Date().toISOString(), status: setupStatus, logs: this.setupLogs }, version: { coglet: '0.17.0', cog: '0.17.0', python: '3.12.0' } });
    }
    if (req.method === 'GET' && path === '/openapi.json') return send(200, this.openapi);
    const file = req.method === 'GET' && /^\/files\/(.+)$/.exec(path);
    if (file) {
      const f = this.files.get(decodeURIComponent(file[1]));
      if (!f) return send(404, {});
      return void res.writeHead(200, { 'content-type': f.type, 'content-length': f.data.length }).end(f.data);
    }
    const cancel = req.method === 'POST' && /^\/predictions\/([^/]+)\/cancel$/.exec(path);
    if (cancel) {
      // routes.rs cancel_prediction: 200 {} for a prediction it holds, else 404 {}.
      const p = this.predictions.get(decodeURIComponent(cancel[1]));
      this.cancels.push(decodeURIComponent(cancel[1]));
      if (!p || p.status === 'succeeded' || p.status === 'failed' || p.status === 'canceled') return send(404, {});
      p.canceled = true;
      p.wake();
      return send(200, {});
    }
    const put = req.method === 'PUT' && /^\/predictions\/([^/]+)$/.exec(path);
    if (!(put || (req.method === 'POST' && path === '/predictions'))) return send(404, { detail: 'Not Found' });
    let body: Record<string, unknown>;
    try {
      body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {};
    } catch {
      return send(422, { detail: [{ loc: ['body'], msg: 'invalid JSON', type: 'value_error.jsondecode' }] });
    }
    const id = put ? decodeURIComponent(put[1]) : typeof body.id === 'string' ? body.id : `pred_${Date.now().toString(16)}`;
    if (put && body.id !== undefined && body.id !== id) return send(422, { detail: [{ loc: ['body', 'id'], msg: 'prediction ID must match the ID supplied in the URL', type: 'value_error' }] });
    const existing = this.predictions.get(id);
    if (existing) return send(202, this.snapshot(existing));
    if (this.health !== 'READY') return send(503, { error: 'Setup has not finished yet', status: 'failed' });
    if (this.running() > 0) return send(409, { error: 'At capacity - all prediction slots busy', status: 'failed' });
    const input = (body.input ?? {}) as Record<string, unknown>;
    const errors = this.validate(input);
    if (errors.length) return send(422, { detail: errors });
    const webhook = typeof body.webhook === 'string' ? body.webhook : undefined;
    this.created.push({ id, input, headers: req.headers, ...(webhook ? { webhook } : {}) });
    const p: Prediction = { id, status: 'starting', input, logs: '', outputs: [], canceled: false, wake: () => {} };
    this.predictions.set(id, p);
    const run = this.run(p, this.scripts.shift() ?? { steps: [], output: 'ok' }, webhook);
    // Cog's docs/http.md: `Prefer: respond-async` answers 202 at once; without it the answer is the finished prediction.
    if (req.headers.prefer === 'respond-async') return send(202, { id, status: 'starting' });
    await run;
    return send(200, this.snapshot(p));
  }

  /** coglet's input_validation.rs in short: unknown fields are stripped, types, bounds, choices and required are checked. */
  private validate(input: Record<string, unknown>): Array<{ loc: string[]; msg: string; type: string }> {
    const schemas = (this.openapi.components as { schemas: Record<string, any> }).schemas;
    const spec = schemas.Input;
    const errors: Array<{ loc: string[]; msg: string; type: string }> = [];
    for (const name of Object.keys(input)) if (!(name in spec.properties)) delete input[name];
    for (const name of spec.required ?? []) if (input[name] === undefined) errors.push({ loc: ['body', 'input', name], msg: 'Field required', type: 'missing' });
    for (const [name, value] of Object.entries(input)) {
      let prop = spec.properties[name];
      if (prop.allOf) prop = { ...schemas[prop.allOf[0].$ref.split('/').pop()], ...prop };
      const bad = (msg: string) => errors.push({ loc: ['body', 'input', name], msg, type: 'value_error' });
      if (prop.type === 'integer' && !Number.isInteger(value)) bad('Input should be a valid integer');
      else if (prop.type === 'number' && typeof value !== 'number') bad('Input should be a valid number');
      else if (prop.type === 'string' && typeof value !== 'string') bad('Input should be a valid string');
      else if (prop.maximum !== undefined && (value as number) > prop.maximum) bad(`Input should be less than or equal to ${prop.maximum}`);
      else if (prop.minimum !== undefined && (value as number) < prop.minimum) bad(`Input should be greater than or equal to ${prop.minimum}`);
      else if (prop.enum && !prop.enum.includes(value)) bad(`Input should be ${prop.enum.map((e: unknown) => `'${e}'`).join(', ')}`);
      else if (prop.format === 'uri' && !/^(https?:|data:)/.test(value as string)) bad('Input should be a valid URL');
    }
    return errors;
  }

  /** prediction.rs build_state_snapshot: id, status, logs, output (the list so far while an iterator runs), error, metrics. */
  private snapshot(p: Prediction): Record<string, unknown> {
    const terminal = p.status === 'succeeded' || p.status === 'failed' || p.status === 'canceled';
    return {
      id: p.id,
      status: p.status,
      logs: p.logs,
      ...(p.output !== undefined ? { output: p.output } : p.outputs.length ? { output: [...p.outputs] } : {}),
      ...(p.error !== undefined ? { error: p.error } : {}),
      metrics: terminal ? { predict_time: 0.01 } : {},
    };
  }

  private async hook(p: Prediction, webhook: string | undefined): Promise<void> {
    if (!webhook) return;
    await fetch(webhook, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(this.snapshot(p)) }).catch(() => {});
  }

  private async run(p: Prediction, script: Script, webhook: string | undefined): Promise<void> {
    await this.hook(p, webhook); // `start`
    p.status = 'processing';
    const canceled = new Promise<void>((r) => (p.wake = r));
    for (const step of script.steps) {
      if (p.canceled) break;
      if ('log' in step) p.logs += step.log;
      else if ('yield' in step) p.outputs.push(step.yield);
      else if ('wait' in step) await Promise.race([step.wait, canceled]);
      else {
        p.status = 'failed';
        p.error = step.fail;
        break;
      }
      if ('log' in step || 'yield' in step) await this.hook(p, webhook);
    }
    if (p.canceled) p.status = 'canceled';
    else if (p.status !== 'failed') {
      p.status = 'succeeded';
      p.output = script.output !== undefined ? script.output : [...p.outputs];
    }
    await this.hook(p, webhook); // `completed`
  }
}
