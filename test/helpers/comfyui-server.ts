import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { NODE_CLASSES, type FakeServerState } from './comfyui-nodes.js';

/**
 * A stand-in for a ComfyUI server, written from ComfyUI's source, not from our engine:
 *   server.py     routes: POST /prompt (answers {prompt_id, number, node_errors}, or 400
 *                 {error: {type, message, details, extra_info}, node_errors}), GET
 *                 /history/{id}, GET /view, POST /upload/image (multipart, answers {name,
 *                 subfolder, type}, renames a clash "x (1).png" unless the bytes are equal),
 *                 POST /interrupt (with {prompt_id}: only if that prompt runs), POST /queue
 *                 {delete: [...]}, GET /system_stats; /ws?clientId= sends {type: "status",
 *                 data: {status: {exec_info: {queue_remaining}}, sid}} first, and a prompt's
 *                 messages only to the socket of its client_id (send_json with sid).
 *   execution.py  validate_prompt (missing_node_type, prompt_no_outputs, required_input_missing,
 *                 value_not_in_list), PromptExecutor.execute_async (execution_start,
 *                 execution_cached, per node executing {node, display_node, prompt_id} and
 *                 executed {node, display_node, output, prompt_id}, execution_success; on failure
 *                 execution_error / execution_interrupted with node_id, node_type, executed...),
 *                 PromptQueue (one prompt runs at a time, the history entry {prompt, outputs,
 *                 status: {status_str, completed, messages}, meta}).
 *   main.py       prompt_worker (task_done writes the history, then executing {node: null}),
 *                 hijack_progress (progress {value, max, prompt_id, node}).
 * It keeps no cache between prompts (execution_cached lists no nodes, as for a first run).
 */

interface QueueItem {
  number: number;
  prompt_id: string;
  prompt: Record<string, { class_type: string; inputs: Record<string, unknown> }>;
  client_id?: string;
  outputs: string[];
  /** Called once the prompt is over (history written, executing null sent). */
  over?: () => void;
}

export interface RecordedCall {
  method: string;
  path: string;
  body: any;
}

/** A place where the next prompt stops until released (or interrupted): `reached` settles when it gets there. */
export interface Hold {
  reached: Promise<string>;
  release(): void;
}

export class FakeComfyUi {
  url = '';
  readonly calls: RecordedCall[] = [];
  /** WebSocket connections opened so far. */
  connections = 0;
  /** POST /prompt bodies as received. */
  readonly prompts: Array<{ prompt: any; client_id?: string; prompt_id?: string }> = [];
  readonly checkpoints = ['v1-5-pruned-emaonly-fp16.safetensors', 'sd_xl_base_1.0.safetensors', 'hunyuan3d-dit-v2.safetensors', 'stable-audio-open-1.0.safetensors'];
  readonly inputs = new Map<string, Buffer>();
  readonly files = new Map<string, Buffer>();
  readonly history = new Map<string, unknown>();
  /**
   * Answer POST /prompt only once the prompt has run: ComfyUI's prompt worker is a thread beside
   * the HTTP handler, so a quick prompt (all cached) can send all its messages before the answer.
   */
  answerLate = false;
  /** While set, every prompt fails at the first node of this class with this exception. */
  failWith: { class_type: string; exception_type: string; exception_message: string } | null = null;
  private readonly http = http.createServer((req, res) => void this.handle(req, res).catch((err) => res.writeHead(500).end(String(err))));
  private readonly wss = new WebSocketServer({ noServer: true });
  private readonly sockets = new Map<string, WebSocket>();
  private readonly conns = new Set<Socket>();
  private readonly queue: QueueItem[] = [];
  private running: QueueItem | null = null;
  private interrupted = false;
  private number = 0;
  private counters = new Map<string, number>();
  private hold: { class_type: string; step: number; reached: (id: string) => void; released: Promise<void>; release: () => void } | null = null;
  /** The hold the running prompt waits at: an interrupt ends the wait, as ComfyUI notices one at its next step. */
  private paused: { release: () => void } | null = null;

  async start(port = 0): Promise<this> {
    this.http.on('connection', (c) => {
      this.conns.add(c);
      c.on('close', () => this.conns.delete(c));
    });
    this.http.on('upgrade', (req, socket, head) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.pathname !== '/ws') return socket.destroy();
      this.wss.handleUpgrade(req, socket, head, (ws) => this.onSocket(ws, url.searchParams.get('clientId') || randomUUID().replaceAll('-', '')));
    });
    await new Promise<void>((r) => this.http.listen(port, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.http.address() as AddressInfo).port}`;
    return this;
  }

  /** The server goes away at once: sockets dropped, connections cut, nothing listening. */
  async stop(): Promise<void> {
    for (const ws of this.wss.clients) ws.terminate();
    for (const c of this.conns) c.destroy();
    this.paused?.release();
    await new Promise((r) => this.http.close(r));
  }

  /** Stops the next prompt at `step` of the first node of `class_type` (step 0: before the node runs). */
  holdAt(class_type: string, step: number): Hold {
    let reached!: (id: string) => void;
    const reachedP = new Promise<string>((r) => (reached = r));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    this.hold = { class_type, step, reached, released, release };
    return { reached: reachedP, release };
  }

  callsTo(path: string): RecordedCall[] {
    return this.calls.filter((c) => c.path === path);
  }

  private onSocket(ws: WebSocket, sid: string): void {
    // server.py websocket_handler: a reused clientId replaces the old socket.
    this.connections++;
    this.sockets.set(sid, ws);
    ws.on('close', () => this.sockets.get(sid) === ws && this.sockets.delete(sid));
    this.send('status', { status: this.queueInfo(), sid }, sid);
  }

  private queueInfo() {
    return { exec_info: { queue_remaining: this.queue.length + (this.running ? 1 : 0) } };
  }

  /** send_json: to one client's socket if it is connected, or to every socket. */
  private send(type: string, data: Record<string, unknown>, sid?: string): void {
    const text = JSON.stringify({ type, data });
    if (sid === undefined) for (const ws of this.sockets.values()) ws.send(text);
    else this.sockets.get(sid)?.send(text);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const json = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
    };
    const parsed = () => (raw.length ? JSON.parse(raw.toString()) : {});
    const route = `${req.method} ${url.pathname}`;
    if (req.method === 'POST' && url.pathname !== '/upload/image') this.calls.push({ method: req.method, path: url.pathname, body: parsed() });

    if (route === 'GET /system_stats') {
      return json(200, { system: { os: 'posix', ram_total: 1 << 30, ram_free: 1 << 29, comfyui_version: '0.3.99-fake', python_version: '3.12.3', pytorch_version: '2.5.1', embedded_python: false, argv: ['main.py'] }, devices: [{ name: 'cpu', type: 'cpu', index: null, vram_total: 0, vram_free: 0, torch_vram_total: 0, torch_vram_free: 0 }] });
    }
    if (route === 'GET /object_info') {
      // node_info's fields, those a client reads to know a node type exists and what it takes.
      return json(200, Object.fromEntries(Object.entries(NODE_CLASSES).map(([name, c]) => [name, { input: { required: Object.fromEntries(c.required.map((k) => [k, ['*']])) }, name, display_name: name, category: 'fake', output_node: !!c.output }])));
    }
    if (route === 'POST /prompt') return this.postPrompt(parsed(), json);
    if (req.method === 'GET' && url.pathname.startsWith('/history/')) {
      const id = decodeURIComponent(url.pathname.slice('/history/'.length));
      return json(200, this.history.has(id) ? { [id]: this.history.get(id) } : {});
    }
    if (route === 'GET /view') {
      const [filename, subfolder, type] = ['filename', 'subfolder', 'type'].map((k) => url.searchParams.get(k) ?? '');
      const data = type === 'input' ? this.inputs.get(filename) : this.files.get(`${type || 'output'}/${subfolder}/${filename}`);
      if (!data) return void res.writeHead(404).end();
      // mimetypes.guess_type: no .glb in Python's table (nor in utils/mime_types.py), .wav is audio/x-wav.
      const type2 = /\.png$/.test(filename) ? 'image/png' : /\.wav$/.test(filename) ? 'audio/x-wav' : 'application/octet-stream';
      return void res.writeHead(200, { 'content-type': type2, 'content-disposition': `filename="${filename}"` }).end(data);
    }
    if (route === 'POST /upload/image') {
      const form = await new Response(raw, { headers: { 'content-type': req.headers['content-type'] ?? '' } }).formData();
      const image = form.get('image');
      if (!(image instanceof Blob) || !('name' in image) || !image.name) return void res.writeHead(400).end();
      const bytes = Buffer.from(await image.arrayBuffer());
      this.calls.push({ method: 'POST', path: '/upload/image', body: { name: image.name, type: form.get('type'), size: bytes.length } });
      let name = image.name as string;
      const dot = name.lastIndexOf('.');
      for (let i = 1; this.inputs.has(name) && !this.inputs.get(name)!.equals(bytes); i++) name = `${image.name.slice(0, dot)} (${i})${image.name.slice(dot)}`;
      this.inputs.set(name, bytes);
      return json(200, { name, subfolder: '', type: 'input' });
    }
    if (route === 'POST /interrupt') {
      const id = parsed().prompt_id;
      if (!id || this.running?.prompt_id === id) {
        this.interrupted = true;
        this.paused?.release();
      }
      return void res.writeHead(200).end();
    }
    if (route === 'POST /queue') {
      for (const id of parsed().delete ?? []) {
        const at = this.queue.findIndex((q) => q.prompt_id === id);
        if (at >= 0) this.queue.splice(at, 1);
      }
      return void res.writeHead(200).end();
    }
    res.writeHead(404).end();
  }

  private async postPrompt(body: any, json: (status: number, body: unknown) => void): Promise<void> {
    const prompt = body.prompt;
    this.prompts.push(body);
    if (!prompt || typeof prompt !== 'object') return json(400, { error: { type: 'no_prompt', message: 'No prompt provided', details: 'No prompt provided', extra_info: {} }, node_errors: {} });
    for (const [id, node] of Object.entries<any>(prompt)) {
      if (!NODE_CLASSES[node?.class_type]) {
        return json(400, { error: { type: 'missing_node_type', message: `Node '${node?.class_type ?? `ID #${id}`}' not found. The custom node may not be installed.`, details: `Node ID '#${id}'`, extra_info: { node_id: id, class_type: node?.class_type ?? null } }, node_errors: {} });
      }
    }
    const outputs = Object.keys(prompt).filter((id) => NODE_CLASSES[prompt[id].class_type].output);
    if (outputs.length === 0) return json(400, { error: { type: 'prompt_no_outputs', message: 'Prompt has no outputs', details: '', extra_info: {} }, node_errors: {} });
    const nodeErrors: Record<string, unknown> = {};
    for (const [id, node] of Object.entries<any>(prompt)) {
      const cls = NODE_CLASSES[node.class_type];
      const errors = cls.required.filter((k) => !(k in node.inputs)).map((k) => ({ type: 'required_input_missing', message: 'Required input is missing', details: k, extra_info: { input_name: k } }));
      const invalid = cls.validate?.(node.inputs, this.state);
      if (invalid) errors.push({ ...invalid, extra_info: { input_name: invalid.details.split(/[:,]/)[0] } as any });
      if (errors.length) nodeErrors[id] = { errors, dependent_outputs: outputs, class_type: node.class_type };
    }
    if (Object.keys(nodeErrors).length) {
      const details = Object.values<any>(nodeErrors).flatMap((n) => n.errors.map((e: any) => `${e.message}: ${e.details}`)).join('\n');
      return json(400, { error: { type: 'prompt_outputs_failed_validation', message: 'Prompt outputs failed validation', details, extra_info: {} }, node_errors: nodeErrors });
    }
    const item: QueueItem = { number: this.number++, prompt_id: randomUUID(), prompt, client_id: body.client_id, outputs };
    this.queue.push(item);
    this.send('status', { status: this.queueInfo() });
    const over = new Promise<void>((r) => (item.over = r));
    if (!this.running) void this.work();
    if (this.answerLate) await over;
    json(200, { prompt_id: item.prompt_id, number: item.number, node_errors: {} });
  }

  private readonly state: FakeServerState = {
    checkpoints: this.checkpoints,
    inputs: this.inputs,
    save: (prefix, ext, data) => {
      const slash = prefix.lastIndexOf('/');
      const subfolder = slash >= 0 ? prefix.slice(0, slash) : '';
      const base = prefix.slice(slash + 1);
      const n = (this.counters.get(prefix) ?? 0) + 1;
      this.counters.set(prefix, n);
      const filename = `${base}_${String(n).padStart(5, '0')}_.${ext}`;
      this.files.set(`output/${subfolder}/${filename}`, data);
      return { filename, subfolder, type: 'output' };
    },
  };

  /** main.py prompt_worker: one prompt at a time, in queue order. */
  private async work(): Promise<void> {
    while (this.queue.length) {
      const item = (this.running = this.queue.shift()!);
      this.send('status', { status: this.queueInfo() });
      const { status, outputs } = await this.execute(item);
      this.history.set(item.prompt_id, { prompt: [item.number, item.prompt_id, item.prompt, { client_id: item.client_id }, item.outputs], outputs, status, meta: {} });
      this.running = null;
      this.send('status', { status: this.queueInfo() });
      if (item.client_id) this.send('executing', { node: null, prompt_id: item.prompt_id }, item.client_id);
      item.over?.();
    }
  }

  private async execute(item: QueueItem): Promise<{ status: unknown; outputs: Record<string, unknown> }> {
    const sid = item.client_id;
    const { prompt_id, prompt } = item;
    const messages: Array<[string, unknown]> = [];
    const add = (type: string, data: Record<string, unknown>) => {
      const d = { ...data, prompt_id, timestamp: Date.now() };
      messages.push([type, d]);
      if (sid) this.send(type, d, sid);
    };
    this.interrupted = false;
    add('execution_start', {});
    add('execution_cached', { nodes: [] });
    const results = new Map<string, unknown[]>();
    const ui: Record<string, unknown> = {};
    const executed: string[] = [];
    const fail = this.failWith;
    const end = (ok: boolean) => ({ status: { status_str: ok ? 'success' : 'error', completed: ok, messages }, outputs: ui });
    for (const id of executionOrder(prompt, item.outputs)) {
      const node = prompt[id];
      const cls = NODE_CLASSES[node.class_type];
      if (this.interrupted) return add('execution_interrupted', { node_id: id, node_type: node.class_type, executed }), end(false);
      if (sid) this.send('executing', { node: id, display_node: id, prompt_id }, sid);
      await new Promise((r) => setImmediate(r));
      if (fail?.class_type === node.class_type) {
        add('execution_error', { node_id: id, node_type: node.class_type, executed, exception_message: fail.exception_message, exception_type: fail.exception_type, traceback: ['  File "execution.py", line 1, in execute\n'], current_inputs: {}, current_outputs: executed });
        return end(false);
      }
      const steps = cls.steps?.(node.inputs) ?? 0;
      for (let step = 0; step <= steps; step++) {
        const hold = this.hold;
        if (hold && hold.class_type === node.class_type && hold.step === step) {
          this.hold = null;
          this.paused = hold;
          hold.reached(prompt_id);
          await hold.released;
          this.paused = null;
        }
        // hijack_progress's hook checks for an interrupt before each report.
        if (this.interrupted) return add('execution_interrupted', { node_id: id, node_type: node.class_type, executed }), end(false);
        if (step > 0 && sid) this.send('progress', { value: step, max: steps, prompt_id, node: id }, sid);
      }
      const inputs = Object.fromEntries(Object.entries(node.inputs).map(([k, v]) => [k, Array.isArray(v) ? results.get(String(v[0]))?.[Number(v[1])] : v]));
      const out = await cls.run(inputs, this.state);
      results.set(id, out.outputs);
      executed.push(id);
      if (out.ui) {
        ui[id] = out.ui;
        if (sid) this.send('executed', { node: id, display_node: id, output: out.ui, prompt_id }, sid);
      }
    }
    add('execution_success', {});
    return end(true);
  }
}


/** The nodes the outputs need, each after its inputs (ExecutionList's order, without its heuristics). */
function executionOrder(prompt: QueueItem['prompt'], outputs: string[]): string[] {
  const order: string[] = [];
  const visit = (id: string) => {
    if (order.includes(id)) return;
    for (const v of Object.values(prompt[id].inputs)) if (Array.isArray(v) && prompt[String(v[0])]) visit(String(v[0]));
    order.push(id);
  };
  outputs.forEach(visit);
  return order;
}
