import { monotonicFactory } from 'ulid';
import { NotFoundError, ApiError, ValidationError } from '../../../models/errors.js';
import type { StoredTool, ToolStore } from '../../../models/stores.js';
import type { SsrfGuard } from '../outbound/ssrf-guard.js';
import { mintWebhookSecret } from '../webhooks/signing.js';
import { InputSchemas } from './input-schemas.js';
import { SecretBox } from './secret-box.js';
import { ToolCaller, type ToolOutcome } from './tool-caller.js';
import type { GatewayMetrics } from '../metrics/gateway-metrics.js';

/** A tool as routes, bots and the agent loop see it: the stored tool without its sealed secrets. */
export interface ToolRecord extends Omit<StoredTool, 'secrets'> {}

export interface ToolCallResult extends ToolOutcome {
  tool_id: string;
  name: string;
  duration_ms: number;
}

/** The body of `POST /v1/tools/definitions`, once it passed its JSON Schema. */
export interface CreateToolInput {
  name: string;
  description: string;
  kind: 'http' | 'webhook';
  method?: string;
  url: string;
  inputSchema: Record<string, unknown>;
  auth?: { type: 'bearer'; token: string };
}

export interface ToolServiceOptions {
  store: ToolStore;
  outbound: Pick<SsrfGuard, 'checkUrl' | 'request'>;
  /** The key that seals tool secrets (TOOL_SECRET_KEY, or the one kept under DATA_DIR: tool-secret-key.ts). */
  secretKey: Buffer;
  /** @defaultValue 100 */
  maxPerAccount?: number;
  /** Counts calls by outcome. */
  metrics?: Pick<GatewayMetrics, 'toolCall'>;
}

export const MAX_TOOLS_PER_ACCOUNT = 100;

const TOOL_ID = /^(?:custom:)?(tool_[0-9A-HJKMNP-TV-Z]{26})$/;
const newToolId = monotonicFactory();

const toRecord = ({ secrets: _secrets, ...record }: StoredTool): ToolRecord => record;

/** A failing field, in the shape of the ajv errors of `details.errors`. */
function fieldError(path: string, message: string, keyword: string): ValidationError {
  return new ValidationError(`request body is invalid: ${path} ${message}`, [{ path, message, keyword, params: {} }]);
}

/**
 * Custom tools (docs/tools.md): registration (schema compiled, URL through the SSRF guard,
 * secrets sealed with TOOL_SECRET_KEY, names unique per account in the store), and the calls the
 * agent loop makes, arguments checked against `inputSchema` first.
 */
export class ToolService {
  private readonly secrets: SecretBox;
  private readonly schemas = new InputSchemas();
  private readonly caller: ToolCaller;
  private readonly maxPerAccount: number;

  constructor(private readonly opts: ToolServiceOptions) {
    this.secrets = new SecretBox(opts.secretKey);
    this.caller = new ToolCaller({ outbound: opts.outbound, secrets: this.secrets });
    this.maxPerAccount = opts.maxPerAccount ?? MAX_TOOLS_PER_ACCOUNT;
  }

  /**
   * Registers a tool. A webhook tool's answer carries its signing secret, this once.
   *
   * @throws ApiError invalid_request, invalid_schema, invalid_url, url_blocked (400),
   * name_conflict or conflict (409: the account has `maxPerAccount` tools).
   */
  async create(accountId: string, input: CreateToolInput): Promise<{ tool: ToolRecord; signing_secret: string | null }> {
    const method = this.methodOf(input);
    this.schemas.check(input.inputSchema);
    const url = await this.checkUrl(input.url);
    const id = `tool_${newToolId()}`;
    const signingSecret = input.kind === 'webhook' ? mintWebhookSecret().secret : null;
    const stored: StoredTool = {
      id,
      account_id: accountId,
      name: input.name,
      description: input.description,
      kind: input.kind,
      method,
      url: url.href,
      inputSchema: input.inputSchema,
      auth: input.auth ? { type: 'bearer' } : null,
      created_at: new Date().toISOString(),
      secrets: {
        ...(input.auth ? { bearer_token: this.secrets.seal(input.auth.token, `${id}:bearer_token`) } : {}),
        ...(signingSecret ? { signing_secret: this.secrets.seal(signingSecret, `${id}:signing_secret`) } : {}),
      },
    };
    const outcome = await this.opts.store.create(stored, this.maxPerAccount);
    if (outcome === 'name_conflict') {
      throw new ApiError('name_conflict', `the account already has a tool named "${input.name}"`, { details: { name: input.name } });
    }
    if (outcome === 'limit_reached') {
      throw new ApiError('conflict', `an account may have at most ${this.maxPerAccount} tools; delete one first`, { details: { limit: this.maxPerAccount } });
    }
    return { tool: toRecord(stored), signing_secret: signingSecret };
  }

  /** The account's tool by `tool_...` or `custom:tool_...` id; another account's is not found. */
  async get(accountId: string, id: string): Promise<ToolRecord> {
    const stored = await this.find(accountId, id);
    if (!stored) throw new NotFoundError('tool');
    return toRecord(stored);
  }

  /** The account's tools, oldest first. */
  async list(accountId: string): Promise<ToolRecord[]> {
    return (await this.opts.store.list(accountId)).map(toRecord);
  }

  /** Deletes the account's tool (its name is free again); bots that named it stop resolving it. */
  async delete(accountId: string, id: string): Promise<ToolRecord> {
    const toolId = TOOL_ID.exec(id)?.[1];
    const removed = toolId ? await this.opts.store.delete(accountId, toolId) : null;
    if (!removed) throw new NotFoundError('tool');
    return toRecord(removed);
  }

  /** 'custom:<id>' ids of this account -> records, in order; unknown, malformed or foreign -> ApiError('unknown_tool', ..., {details: {tool_id}}) */
  async resolve(accountId: string, toolIds: string[]): Promise<ToolRecord[]> {
    const found = await Promise.all(toolIds.map((toolId) => (typeof toolId === 'string' && toolId.startsWith('custom:') ? this.find(accountId, toolId) : null)));
    return found.map((stored, i) => {
      if (!stored) throw new ApiError('unknown_tool', `unknown tool ${JSON.stringify(toolIds[i])}: not a custom:<id> of this account`, { details: { tool_id: toolIds[i] } });
      return toRecord(stored);
    });
  }

  /** The OpenAI-style function spec given to the LLM: name, description, parameters = inputSchema */
  llmTool(tool: ToolRecord): { type: 'function'; function: { name: string; description: string; parameters: object } } {
    return { type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.inputSchema } };
  }

  /**
   * Checks args against inputSchema (fails with ok:false, error.code 'invalid_arguments', ajv message), then calls the tool through services.outbound; never throws for tool-side failures (ok:false with error.code 'tool_failed' / 'timeout' / 'url_blocked' / 'response_too_large', status when there was one); output = parsed JSON body if JSON else text (capped)
   *
   * @remarks
   * The stored tool is read again, so a deleted tool is not called (`unknown_tool`) and the URL,
   * method and secrets are the registered ones. `args` may be the LLM's JSON text; none (undefined,
   * null, '') counts as `{}`. A secret that cannot be decrypted (sealed under another key id,
   * or altered) is `unavailable`; an aborted `signal` is `aborted`.
   */
  async call(tool: ToolRecord, args: unknown, opts: { signal?: AbortSignal } = {}): Promise<ToolCallResult> {
    const started = Date.now();
    // Every way out of a call passes here, so this is where it is counted.
    const result = (outcome: ToolOutcome): ToolCallResult => {
      this.opts.metrics?.toolCall(outcome.ok);
      return { tool_id: `custom:${tool.id}`, name: tool.name, ...outcome, duration_ms: Date.now() - started };
    };
    const failed = (code: string, message: string) => result({ ok: false, status: null, output: null, error: { code, message } });
    const stored = await this.opts.store.get(tool.account_id, tool.id);
    if (!stored) return failed('unknown_tool', `the tool ${tool.name} (custom:${tool.id}) no longer exists`);
    const parsed = argumentsOf(args);
    if (typeof parsed === 'string') return failed('invalid_arguments', parsed);
    const validate = this.schemas.validator(stored.id, stored.inputSchema);
    if (!validate(parsed)) return failed('invalid_arguments', `the arguments do not match the tool's inputSchema: ${InputSchemas.describe(validate.errors)}`);
    return result(await this.caller.call(stored, parsed, opts.signal));
  }

  private async find(accountId: string, id: string): Promise<StoredTool | null> {
    const toolId = TOOL_ID.exec(id)?.[1];
    return toolId ? this.opts.store.get(accountId, toolId) : null;
  }

  /** http tools name their method; webhook tools are always POSTed and carry no bearer token. */
  private methodOf(input: CreateToolInput): string {
    if (input.kind === 'http') {
      if (!input.method) throw fieldError('/method', 'is required for http tools', 'required');
      return input.method;
    }
    if (input.method && input.method !== 'POST') throw fieldError('/method', 'must be POST for webhook tools (or left out)', 'const');
    if (input.auth) throw fieldError('/auth', 'is not taken by webhook tools: their calls are signed with the signing_secret instead', 'not');
    return 'POST';
  }

  /** The SSRF guard's verdict, naming the field. */
  private async checkUrl(url: string): Promise<URL> {
    try {
      return await this.opts.outbound.checkUrl(url);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      throw new ApiError(err.code, `url: ${err.message}`, { details: { path: '/url' }, cause: err });
    }
  }
}

/** The arguments as an object, or why they are not one. */
function argumentsOf(args: unknown): Record<string, unknown> | string {
  let value = args;
  if (value === undefined || value === null || value === '') return {};
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch {
      return 'the arguments are not valid JSON';
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'the arguments must be a JSON object';
  return value as Record<string, unknown>;
}
