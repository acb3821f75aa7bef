import { KINDS } from '../../../models/kinds.js';
import { EXAMPLE_FILE_ID, KIND_INPUT_EXAMPLES } from './kind-examples.js';
import { kindSlug } from './job-requests.js';
import { BATCH_EXAMPLES } from './batch-examples.js';
import { consoleExamples } from './console-examples.js';
import { limitsExamples } from './limits-examples.js';

/**
 * The document's examples, by operationId: a request body and answers by status (JSON, or text
 * for text bodies). test/openapi.test.ts checks each against its operation's schema, and that
 * every operation has one; error answers not named here get builder's example of their status.
 */

export interface OperationExamples {
  /** One body, or several by name (`{summary, value}` each). */
  request?: unknown;
  requests?: Record<string, { summary: string; value: unknown }>;
  responses?: Record<number, unknown>;
}

/** The error answer shown for a status when the operation names none of its own. */
export const ERROR_EXAMPLES: Record<number, { error: { code: string; message: string; details?: Record<string, unknown> } }> = {
  400: { error: { code: 'invalid_request', message: 'request body is invalid: /name must be string', details: { errors: [{ path: '/name', message: 'must be string' }] } } },
  401: { error: { code: 'unauthorized', message: 'a valid API key is required' } },
  402: { error: { code: 'insufficient_credits', message: 'this job costs 4 credits; the account has 1', details: { needed: 4, available: 1 } } },
  403: { error: { code: 'forbidden', message: 'this origin may not use the bot' } },
  404: { error: { code: 'not_found', message: 'not found' } },
  405: { error: { code: 'method_not_allowed', message: 'method not allowed' } },
  409: { error: { code: 'conflict', message: 'the resource changed; try again' } },
  413: { error: { code: 'payload_too_large', message: 'the request body is too large' } },
  415: { error: { code: 'unsupported_media_type', message: 'unsupported content type or charset: send application/json in UTF-8' } },
  416: { error: { code: 'range_not_satisfiable', message: 'the requested range is not satisfiable; the content has 183422 bytes', details: { size: 183_422 } } },
  422: { error: { code: 'max_steps', message: 'the bot used its steps without an answer' } },
  429: { error: { code: 'rate_limited', message: 'too many requests for this API key; retry in 1 s' } },
  500: { error: { code: 'internal', message: 'internal error' } },
  503: { error: { code: 'unavailable', message: 'not ready: a backing service is unreachable' } },
};

const GATEWAY = 'https://switchyard.example';
const T0 = '2026-01-15T09:30:00.000Z';
const T1 = '2026-01-15T09:30:04.250Z';
const T2 = '2026-01-15T09:30:11.900Z';
const LATER = '2026-01-22T09:30:00.000Z';
const RUN = 'run_01JHB3Q4ZK8M2N5P7R9S1T3V5W';
const ACCOUNT = 'acct_01JHB2XG0M8N4P6R8S0T2V4W6X';
const OPERATOR = 'op_01JHB2YC3D5E7F9G1H3J5K7M9N';
const TOOL = 'tool_01JHB4A2B4C6D8E0F2G4H6J8K0';
const BOT = 'bot_01JHB4C8D0E2F4G6H8J0K2M4N6';
const SHA = '6fb22b26e5303dad023b1e1dba48910d41b0d059b7170e15a471af04d22ac3a6';
const ARTIFACT_URL = `${GATEWAY}/v1/artifacts/mfrggzdfmztwq2lknnwg23tpobyxe43u/image.png`;
const WORKER = 'wrk_gpu-07';
const EMBED_TOKEN = 'sybot_3kq9v7x2m4p6r8t0w2y4a6c8e0g2h4j6';

const accepted = { run_id: RUN, kind: 'inference:image:generate', status: 'queued', confidentiality: 'open', class: 'standard', priority: 20, created_at: T0, warnings: [] };
const job = {
  ...accepted,
  status: 'succeeded',
  terminal: true,
  started_at: T1,
  finished_at: T2,
  progress: 1,
  attempts: 1,
  queue_position: null,
  waiting_reason: null,
  waiting_ranks: null,
  output: {
    urls: [ARTIFACT_URL],
    files: [{ url: ARTIFACT_URL, name: 'image.png', content_type: 'image/png', size: 183_422, sha256: SHA }],
    width: 1024,
    height: 768,
  },
  error: null,
  attestation: null,
};
delete (job as { warnings?: unknown }).warnings;
const queuedJob = { ...job, status: 'queued', terminal: false, started_at: null, finished_at: null, progress: null, attempts: 0, queue_position: 3, output: null };
const canceledJob = { ...queuedJob, status: 'canceled', terminal: true, finished_at: T1, queue_position: null };
const account = { id: ACCOUNT, name: 'acme', credits: 1500, reserved: 20, created_at: T0 };
const apiKey = { id: 'key_jlpfmp5o3v4sio7p', prefix: 'sy_jlpfmp5o', name: 'ci', created_at: T0, revoked_at: null };
const workerToken = { id: 'wtok_mguxhhgupnpbwf2p', worker_token: 'swt_mguxhhgupnpbwf2ppSQ6fgdJjkxBGovczHibWke0KdCMpnJv', trust: 'open', created_at: T0 };
const operator = { id: OPERATOR, name: 'gpu-farm', trust: 'trusted', created_at: T0 };
const model = {
  object: 'model',
  kind: 'inference:image:generate',
  id: 'sdxl-turbo',
  description: 'SDXL Turbo, 1 to 4 steps',
  input_schema: { type: 'object', properties: { steps: { type: 'integer', minimum: 1, maximum: 4 } } },
  ranks: null,
  middle_ranks: null,
  declared: true,
  first_seen: T1,
  last_seen: T2,
  created_at: T0,
  updated_at: T0,
};
const file = {
  id: EXAMPLE_FILE_ID,
  url: `${GATEWAY}/v1/files/${EXAMPLE_FILE_ID}`,
  filename: 'chair.png',
  content_type: 'image/png',
  size: 48_213,
  sha256: SHA,
  created_at: T0,
  expires_at: LATER,
};
const tool = {
  id: TOOL,
  tool_id: `custom:${TOOL}`,
  name: 'order_status',
  description: 'Look up an order by its number',
  kind: 'http',
  method: 'GET',
  url: 'https://shop.example/api/orders',
  inputSchema: { type: 'object', required: ['order'], properties: { order: { type: 'string' } } },
  auth: { type: 'bearer' },
  created_at: T0,
};
const bot = {
  id: BOT,
  name: 'helpdesk',
  model: 'llama-3.1-8b-instruct',
  systemPrompt: 'You answer questions about orders.',
  tools: [tool.tool_id],
  greeting: 'Hi! Ask me about your order.',
  allowedOrigins: ['https://shop.example'],
  secure: false,
  embedToken: EMBED_TOKEN,
  chatUrl: `${GATEWAY}/v1/bots/${BOT}/chat?token=${EMBED_TOKEN}`,
  invokeUrl: `${GATEWAY}/v1/bots/${BOT}/invoke`,
  wsUrl: `wss://switchyard.example/v1/bots/${BOT}/ws?token=${EMBED_TOKEN}`,
  flow: { id: 'flow_helpdesk', status: 'published', version: 1 },
  created_at: T0,
};
const byTier = (open: number, trusted: number, priv: number) => ({ open, trusted, private: priv });
const imageKind = KINDS[0];
const openAiModel = { id: 'llama-3.1-8b-instruct', object: 'model', created: 1768469400, owned_by: 'switchyard' };
const rankedExample = {
  ranks: 2,
  middle_ranks: 'trusted',
  ranks_available: [
    { rank: 0, workers: byTier(0, 1, 0) },
    { rank: 1, workers: byTier(1, 1, 0) },
  ],
  pipelines: byTier(1, 1, 0),
};
const rankedOpenAiModel = {
  id: 'tiny-llm-3r',
  object: 'model',
  created: 0,
  owned_by: 'switchyard',
  ranks: 3,
  middle_ranks: 'open',
  ranks_available: [
    { rank: 0, workers: byTier(0, 1, 0) },
    { rank: 1, workers: byTier(2, 0, 0) },
    { rank: 2, workers: byTier(0, 1, 0) },
  ],
  pipelines: byTier(1, 1, 0),
};

export const OPERATION_EXAMPLES: Record<string, OperationExamples> = {
  submitJob: {
    requests: Object.fromEntries(KINDS.map((k) => [kindSlug(k.kind), { summary: k.description, value: { kind: k.kind, input: KIND_INPUT_EXAMPLES[k.kind] } }])),
    responses: {
      201: job,
      202: accepted,
      409: { error: { code: 'idempotency_conflict', message: 'Idempotency-Key was used with another body' } },
      402: { error: { code: 'insufficient_credits', message: 'this job costs 4 credits; the account has 1', details: { needed: 4, available: 1 } } },
    },
  },
  listJobs: { responses: { 200: { data: [job, queuedJob], next_cursor: null } } },
  // Asked with ?include=input: the job object and the input it ran with.
  getJob: { responses: { 200: { ...job, input: { prompt: 'a lighthouse at dusk, oil painting', width: 1024, height: 768 } } } },
  cancelJob: { responses: { 200: canceledJob, 409: { error: { code: 'already_terminal', message: `run ${RUN} is already succeeded`, details: { status: 'succeeded' } } } } },
  streamJobEvents: {
    responses: {
      200:
        `id: 3\nevent: status\ndata: {"run_id":"${RUN}","status":"running","terminal":false}\n\n` +
        'id: 4\nevent: progress\ndata: {"progress":0.5,"message":"denoising"}\n\n' +
        `id: 5\nevent: done\ndata: {"run_id":"${RUN}","status":"succeeded","terminal":true}\n\n`,
    },
  },
  getAccount: { responses: { 200: account } },
  createApiKey: { request: { name: 'ci' }, responses: { 201: { ...apiKey, key: 'sy_jlpfmp5o3v4sio7pTtxKZrHRU4LFeECDEHcBBcBTRMGlG8qJ' } } },
  listApiKeys: { responses: { 200: { data: [{ ...apiKey, id: 'key_z54pugh7cr7t2d3u', prefix: 'sy_z54pugh7', name: 'initial' }, apiKey] } } },
  revokeApiKey: { responses: { 200: { ...apiKey, revoked_at: T2 } } },
  createWorkerToken: { responses: { 201: workerToken } },
  adminCreateAccount: { request: { name: 'acme', credits: 1000 }, responses: { 201: { account: { ...account, credits: 1000, reserved: 0 }, api_key: 'sy_z54pugh7cr7t2d3uOqOvv7VUZIta5uoHnXAdYQG1cUB6n19o' } } },
  adminAdjustCredits: { request: { delta: 500 }, responses: { 200: { account } } },
  adminSetBudget: { request: { budget: 5000 }, responses: { 200: { account: { ...account, budget: { monthly: 5000, period: '2026-11', spent: 1200 } } } } },
  ...limitsExamples(account.id),
  ...consoleExamples(account.id),
  adminCreateOperator: { request: { name: 'gpu-farm', trust: 'trusted' }, responses: { 201: { operator, worker_token: 'swt_tqwv3brqp2bsmwjnaLaLTBHETMisSOGTQ7Cuy7AuRRdyoolO' } } },
  adminListOperators: { responses: { 200: { data: [operator] } } },
  adminGetOperator: { responses: { 200: operator } },
  adminSetOperatorTrust: { request: { trust: 'open' }, responses: { 200: { ...operator, trust: 'open' } } },
  adminCreateOperatorWorkerToken: { responses: { 201: { ...workerToken, trust: 'trusted' } } },
  adminListModels: { responses: { 200: { data: [model] } } },
  adminDeclareModel: { request: { description: model.description, input_schema: model.input_schema }, responses: { 200: model, 201: { ...model, first_seen: null, last_seen: null } } },
  adminGetModel: { responses: { 200: model } },
  adminDeleteModel: { responses: { 404: { error: { code: 'not_found', message: 'model not found' } } } },
  getCapabilities: {
    responses: {
      200: {
        kinds: [
          {
            kind: imageKind.kind,
            rollout: imageKind.rollout,
            description: imageKind.description,
            workers: 3,
            workers_by_tier: byTier(2, 1, 0),
            workers_unavailable: 0,
            input_schema: imageKind.inputSchema,
            output_artifacts: imageKind.output.artifacts,
            output_schema: imageKind.output.schema,
            models: [
              { id: model.id, description: model.description, workers: 1, workers_by_tier: byTier(1, 0, 0), workers_unavailable: 0, input_schema: model.input_schema, ranks: null, middle_ranks: null, ranks_available: null, pipelines: null },
              // A 2-rank model: one trusted pipeline (and open jobs may also use the open rank-1 worker).
              {
                id: 'flux-dev-2r',
                description: 'FLUX.1 dev in 2 ranks',
                workers: 3,
                workers_by_tier: byTier(1, 2, 0),
                workers_unavailable: 0,
                input_schema: null,
                ...rankedExample,
              },
            ],
          },
        ],
      },
    },
  },
  getCapacity: {
    responses: {
      200: {
        workers: { total: 3, by_tier: byTier(2, 1, 0), unavailable: 1 },
        slots: { total: 6, busy: 2, free: 3, unavailable: 1 },
        jobs: { queued: 1, running: 2 },
        by_kind: [{ kind: imageKind.kind, workers: 3, workers_unavailable: 1, slots_free: 3, queued: 1, models: [{ id: model.id, workers: 1, workers_unavailable: 0, slots_free: 1, queued: 0 }] }],
        updated_at: T2,
      },
    },
  },
  uploadArtifact: { responses: { 201: { url: ARTIFACT_URL, sha256: SHA, size: 183_422, content_type: 'image/png', expires_at: LATER } } },
  getLeaseInputFile: { responses: { 404: { error: { code: 'not_found', message: 'input file not found' } } } },
  getArtifact: { responses: { 404: { error: { code: 'not_found', message: 'artifact not found' } } } },
  uploadFile: { responses: { 201: file, 409: { error: { code: 'quota_exceeded', message: "the account's files would hold more than FILE_QUOTA_BYTES" } } } },
  listFiles: { responses: { 200: { data: [file], next_cursor: null, quota: { used_bytes: file.size, quota_bytes: 1_073_741_824 } } } },
  getFile: { responses: { 200: file } },
  deleteFile: { responses: { 404: { error: { code: 'not_found', message: 'file not found' } } } },
  getFileContent: { responses: { 404: { error: { code: 'not_found', message: 'file not found' } } } },
  listJobWebhookAttempts: {
    responses: {
      200: {
        data: [
          { webhook_id: `msg_${RUN}_completed`, event: 'completed', url: 'https://shop.example/hooks/switchyard', attempt: 1, at: T2, status_code: 503, error: null, duration_ms: 120, outcome: 'retrying', next_attempt_at: LATER },
          { webhook_id: `msg_${RUN}_completed`, event: 'completed', url: 'https://shop.example/hooks/switchyard', attempt: 2, at: LATER, status_code: 204, error: null, duration_ms: 95, outcome: 'delivered', next_attempt_at: null },
        ],
      },
    },
  },
  getWebhookSecret: { responses: { 200: { secret: 'whsec_GRDVlB6Xyi8tjvbUtmSaINS5i3B3pv8x', created_at: T0 } } },
  rotateWebhookSecret: { responses: { 200: { secret: 'whsec_QIGbvUb9BoVWI/KWW9XXk8mmsWnYw6Xi', created_at: T2 } } },
  createBot: {
    request: { name: bot.name, model: bot.model, systemPrompt: bot.systemPrompt, tools: bot.tools, greeting: bot.greeting, allowedOrigins: bot.allowedOrigins },
    responses: { 201: bot },
  },
  listBots: { responses: { 200: { data: [bot] } } },
  getBot: { responses: { 200: bot } },
  deleteBot: { responses: { 200: bot } },
  createBotSession: { responses: { 201: { token: 'sysess_7h2k4m6p8r0t2v4x6z8b0d2f4h6k', expires_at: T2 } } },
  invokeBot: {
    request: { message: 'Where is order 1042?' },
    responses: {
      200: {
        conversation_id: 'conv_01JHB5D2F4G6H8J0K2M4N6P8Q0',
        reply: 'Order 1042 shipped yesterday; it should arrive on Friday.',
        steps: [
          {
            type: 'tool_call',
            tool_id: tool.tool_id,
            name: tool.name,
            arguments: { order: '1042' },
            ok: true,
            status: 200,
            output: { status: 'shipped', eta: '2026-01-17' },
            error: null,
            duration_ms: 84,
            llm_run_id: RUN,
          },
        ],
      },
    },
  },
  invokeBotPreflight: { responses: { 404: { error: { code: 'not_found', message: 'bot not found' } } } },
  getBotChatPage: { responses: { 200: '<!doctype html>\n<html lang="en"><head><title>helpdesk</title></head><body>...</body></html>\n' } },
  getEmbedScript: { responses: { 200: '(() => { /* adds the chat bubble of the bot named by data-bot-id */ })();\n' } },
  createChatCompletion: {
    request: { model: openAiModel.id, messages: [{ role: 'user', content: 'Name three moons of Jupiter.' }] },
    responses: {
      200: {
        id: `chatcmpl-${RUN}`,
        object: 'chat.completion',
        created: 1768469411,
        model: openAiModel.id,
        choices: [{ index: 0, message: { role: 'assistant', content: 'Io, Europa and Ganymede.' }, finish_reason: 'stop', logprobs: null }],
        usage: { prompt_tokens: 14, completion_tokens: 8, total_tokens: 22 },
      },
    },
  },
  listModels: { responses: { 200: { object: 'list', data: [openAiModel, rankedOpenAiModel] } } },
  retrieveModel: { responses: { 200: openAiModel } },
  createTool: {
    request: { name: tool.name, description: tool.description, kind: 'http', method: 'GET', url: tool.url, inputSchema: tool.inputSchema, auth: { type: 'bearer', token: 'shop-api-token' } },
    responses: { 201: tool, 409: { error: { code: 'name_conflict', message: 'the account already has a tool named order_status' } } },
  },
  listTools: { responses: { 200: { data: [tool] } } },
  getTool: { responses: { 200: tool } },
  deleteTool: { responses: { 200: tool } },
  getMetrics: {
    responses: {
      200: '# HELP switchyard_jobs_submitted_total Jobs accepted, by kind.\n# TYPE switchyard_jobs_submitted_total counter\nswitchyard_jobs_submitted_total{kind="inference:image:generate"} 42\n',
    },
  },
  getWorkerAttestation: {
    responses: {
      200: {
        worker_id: WORKER,
        receipt_key: { kty: 'EC', crv: 'P-384', x: 'qJ5mQ3yVbQ2c0m8w7kV1Zx9Y3a6D4f2H8jK0lN5pR7sT9uW1', y: 'b4C6d8E0f2G4h6J8k0L2m4N6p8Q0r2S4t6U8v0W2x4Y6z8A0' },
        nonce: 'n-5f1c2e7a9b3d',
        evidence: { token: 'eyJhbGciOiJFUzM4NCJ9.eyJlYXRfbm9uY2UiOiIuLi4ifQ.c2ln', gpus: { 'GPU-0': 'eyJhbGciOiJFUzM4NCJ9.eyJod21vZGVsIjoiSDEwMCJ9.c2ln' } },
        gpus: [{ name: 'NVIDIA H100 80GB HBM3', driverVersion: '550.90.07', vbiosVersion: '96.00.74.00.1C', model: 'GH100' }],
        verified_at: T1,
        expires_at: LATER,
      },
    },
  },
  getVerifierKeys: {
    responses: {
      200: {
        issuer: 'https://nras.attestation.nvidia.com',
        keys: [{ kty: 'EC', crv: 'P-384', kid: 'nv-eat-kid-prod-20240101', use: 'sig', alg: 'ES384', x: 'qJ5mQ3yVbQ2c0m8w7kV1Zx9Y3a6D4f2H8jK0lN5pR7sT9uW1', y: 'b4C6d8E0f2G4h6J8k0L2m4N6p8Q0r2S4t6U8v0W2x4Y6z8A0' }],
        driver_versions: [],
        vbios_versions: [],
      },
    },
  },
  getOpenApi: { responses: { 200: { openapi: '3.1.0', info: { title: 'Switchyard', version: '0.1.0' }, paths: {} } } },
  healthz: { responses: { 200: { status: 'ok' } } },
  readyz: { responses: { 200: { status: 'ready' } } },
  ...BATCH_EXAMPLES,
};
