import type { JobClass, Tier } from './kinds.js';
import type { UnitRate, Usage } from './pricing.js';

export interface Account extends AccountLimits {
  id: string;
  name: string;
  /** What the account can still spend; reservations of runs in flight are already taken off. */
  credits: number;
  /** Credits held by runs in flight. */
  reserved: number;
  /** Runs accepted and not yet terminal. */
  in_flight: number;
  created_at: string;
  /** Monthly budget in credits (docs/jobs.md, "Cost"); null: none. Absent on records from before budgets: none. */
  budget?: number | null;
  /** Credits charged in `spent_period` (a UTC calendar month, `YYYY-MM`). */
  spent?: number;
  spent_period?: string | null;
}

/**
 * An account's concurrency limits and fair-share weight (docs/jobs.md, "Limits and fairness").
 * `max_running` null: the deployment's default (ACCOUNT_MAX_RUNNING); a kind absent from
 * `max_running_by_kind` has no limit of its own.
 */
export interface AccountLimits {
  /** Shares of a round between accounts of one class: weight w gets w jobs a round (models/fair-share.ts). */
  weight: number;
  max_running: number | null;
  max_running_by_kind: Record<string, number>;
}

export const ACCOUNT_LIMIT_DEFAULTS: AccountLimits = { weight: 1, max_running: null, max_running_by_kind: {} };

export interface ApiKeyRecord {
  /** Public id, `key_` followed by the lookup id embedded in the key itself. */
  id: string;
  account_id: string;
  /** The first characters of the key, safe to show. */
  prefix: string;
  name: string | null;
  /** sha256 of the whole key, hex. The key itself is never stored. */
  hash: string;
  created_at: string;
  revoked_at: string | null;
  /** Runs of this key running at once at most; null: the deployment's default (KEY_MAX_RUNNING). */
  max_running: number | null;
}

/**
 * What the request gate checks for an API key (api/services/auth/request-gate.ts): its
 * revocation, then its rate limit (GCRA). Handed to a store that can run the gate in the same
 * atomic step as a run's create (`RunStore.createGated`).
 */
export interface GateCheck {
  /** The key's lookup id and account, which its revocation marker and its rate limiter are found by. */
  lookupId: string;
  accountId: string;
  /** The limit: ms between requests, and the burst tolerance (ms: burst × interval). */
  intervalMs: number;
  toleranceMs: number;
  /** False when limiting is off: only the revocation is checked. */
  limiting: boolean;
}

/**
 * The gate's answer. An allowed request's `nextMs` is when the key may make one request more
 * than `remaining` (-1 remaining: limiting is off); a limited one's `retryAfterMs` is its Retry-After.
 */
export type GateVerdict = { outcome: 'allowed'; remaining: number; nextMs: number } | { outcome: 'limited'; retryAfterMs: number } | { outcome: 'revoked' };

export type OperatorTrust = 'open' | 'trusted';

export interface Operator {
  id: string;
  name: string;
  trust: OperatorTrust;
  created_at: string;
}

export interface WorkerTokenRecord {
  id: string;
  /** Either an operator (admin-issued) or an account (self-minted, open trust). */
  owner: { type: 'operator' | 'account'; id: string };
  trust: OperatorTrust;
  prefix: string;
  hash: string;
  created_at: string;
  revoked_at: string | null;
}

export const RUN_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'canceled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const TERMINAL_STATUSES: readonly RunStatus[] = ['succeeded', 'failed', 'canceled'];
export const isTerminal = (s: RunStatus): boolean => TERMINAL_STATUSES.includes(s);

export type Settlement = 'reserved' | 'charged' | 'released';

/** Moments of a run that its webhook can be told about (Replicate's `webhook_events_filter` names). */
export const WEBHOOK_EVENTS = ['start', 'output', 'logs', 'completed'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/** An account's webhook signing secret, `whsec_` followed by base64 of random bytes (Standard Webhooks). */
export interface WebhookSecret {
  secret: string;
  created_at: string;
}

export interface RunError {
  /** One of RUN_ERROR_CODES (models/run-error-codes.ts) on a run's record. */
  code: string;
  message: string;
  retryable: boolean;
  /** The attempt it happened on (0: before any); set on every run that ends failed, canceled or expired. */
  attempt?: number;
  /** A worker's own code when it is none of the list (the run's `code` is then `engine_error`). */
  reported_code?: string;
}

/** One lease of a run (docs/jobs.md, "Attempts"): who took it, when, and how it ended (null: still running). */
export interface AttemptRecord {
  attempt: number;
  /** An opaque id of the worker, stable per worker (a keyed hash): never its id or token. */
  worker: string | null;
  /** The tier of the worker that took it. */
  tier: Tier | null;
  started_at: string | null;
  ended_at: string | null;
  /** How it ended: null while running or when it succeeded. */
  error: RunError | null;
}

/** What a transition writes of a run's attempt history: its entry of `attempt`, merged in; `drop` removes it. */
export type AttemptWrite = Partial<AttemptRecord> & { attempt: number; drop?: boolean };

/** A file of a run's input, staged by the gateway: where its bytes are, and what they are (docs/files.md). */
export interface InputFileRef {
  /** The bytes, in the artifact store. */
  artifact_id: string;
  size: number;
  content_type: string;
  sha256: string;
}

/** The sha256 of each staged input file by field: what a private run's receipt must sign. */
export function inputFileHashes(run: Pick<RunRecord, 'input_files'>): Record<string, string> {
  return Object.fromEntries(Object.entries(run.input_files ?? {}).map(([field, f]) => [field, f.sha256]));
}

export interface RunRecord {
  run_id: string;
  account_id: string;
  /** The API key that submitted it (its public id), whose concurrency limit it counts against; null: none known. */
  api_key_id?: string | null;
  kind: string;
  status: RunStatus;
  confidentiality: Tier;
  class: JobClass;
  /** BullMQ priority (1 = most urgent), fixed at submission. */
  priority: number;
  /** Credits reserved at submission; on success `charged` of them are charged, the rest returned. */
  price: number;
  settlement: Settlement;
  /** The kind's per-unit price at submission (docs/jobs.md, "Cost"); null: a fixed price, `price`. */
  rate: UnitRate | null;
  /** What the worker reported it used (its `complete` frame); null: nothing reported. */
  usage: Usage | null;
  /** Credits taken at settlement (never more than `price`; 0 unless succeeded); null until then. */
  charged: number | null;
  input: Record<string, unknown>;
  /** The input's files by field name, staged at submission; workers fetch them through their lease. */
  input_files: Record<string, InputFileRef>;
  /** Fields of `input` neither its kind nor its model names, found at submission (docs/models.md). */
  warnings: InputWarning[];
  webhook: string | null;
  /** Which moments reach `webhook`. */
  webhook_events_filter: WebhookEvent[];
  idempotency_key: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  progress: number | null;
  attempts: number;
  output: ({ urls: string[] } & Record<string, unknown>) | null;
  error: RunError | null;
  attestation: Record<string, unknown> | null;
  cancel_requested_at: string | null;
  /** Seconds the run may wait to start (docs/jobs.md, "Deadlines"); null: it may wait forever. */
  ttl_s: number | null;
  /** Seconds an attempt may run; null: unbounded. */
  timeout_s: number | null;
  /** When a run not started yet expires: `created_at` + `ttl_s`. */
  expires_at: string | null;
  /** When the current attempt times out: its start + `timeout_s`; null unless running with a timeout. */
  timeout_at: string | null;
  /** Leases the run may use (null: a record made before jobs set it, the gateway's JOB_MAX_ATTEMPTS). */
  max_attempts: number | null;
  /** A timed-out attempt is retried while attempts remain (docs/jobs.md, "Attempts"). */
  retry_on_timeout: boolean;
  /** Every attempt, oldest first. */
  attempt_history: AttemptRecord[];
  /** Fencing number of the run's current lease (0 before its first); internal. */
  fence: number;
  /** The worker holding the current lease; internal. */
  worker_id: string | null;
  /** The batch it was submitted in (docs/jobs.md, "Batches"); null: submitted alone. */
  batch_id: string | null;
}

/** Fields a transition may change besides `status` (which it names separately). */
export type RunPatch = Partial<
  Pick<RunRecord, 'started_at' | 'finished_at' | 'progress' | 'attempts' | 'output' | 'error' | 'attestation' | 'cancel_requested_at' | 'fence' | 'worker_id' | 'timeout_at' | 'usage'>
>;

/** What a submission asks the store to create; the store fixes `priority` and the settlement. */
export type NewRun = Omit<RunRecord, 'priority' | 'settlement' | 'status' | keyof typeof NEW_RUN_DEFAULTS> & {
  /** Priority of the run's class; the store adds the account's fair-share step (0..9). */
  priorityBase: number;
  /** @defaultValue ['completed'] */
  webhook_events_filter?: WebhookEvent[];
  /** @defaultValue {} */
  input_files?: Record<string, InputFileRef>;
  /** @defaultValue [] */
  warnings?: InputWarning[];
  /** Deadlines (docs/jobs.md); absent or null: none. */
  ttl_s?: number | null;
  timeout_s?: number | null;
  expires_at?: string | null;
  /** Attempts (docs/jobs.md, "Attempts"); absent: the defaults. */
  max_attempts?: number | null;
  retry_on_timeout?: boolean;
  /** @defaultValue null */
  batch_id?: string | null;
  /** @defaultValue null (a fixed price) */
  rate?: UnitRate | null;
};

/** A remark on an accepted input: where (a JSON pointer into `input`) and what. */
export interface InputWarning {
  path: string;
  message: string;
}

/** The fields every new run starts with, besides those its submission gives. */
export const NEW_RUN_DEFAULTS = {
  started_at: null,
  finished_at: null,
  progress: null,
  attempts: 0,
  output: null,
  error: null,
  attestation: null,
  cancel_requested_at: null,
  fence: 0,
  worker_id: null,
  // Also what records written before deadlines existed read as: none.
  ttl_s: null,
  timeout_s: null,
  expires_at: null,
  timeout_at: null,
  // Also what records written before attempts were per job read as.
  max_attempts: null,
  retry_on_timeout: false,
  attempt_history: [],
  // Also what records written before the filter existed read as.
  webhook_events_filter: ['completed'],
  input_files: {},
  warnings: [],
  batch_id: null,
  // Also what records written before usage-based prices read as: a fixed price, charged whole.
  rate: null,
  usage: null,
  charged: null,
} satisfies Partial<RunRecord>;

/**
 * A ranked model's placement policy for its middle ranks (docs/ranks.md): `trusted` keeps every
 * rank of a trusted job on vetted operators' workers; `open` lets any worker carry the ranks
 * that see only activations.
 */
export const MIDDLE_RANKS = ['trusted', 'open'] as const;
export type MiddleRanks = (typeof MIDDLE_RANKS)[number];
/** What a ranked model's `middle_ranks` is when no operator declared one. */
export const DEFAULT_MIDDLE_RANKS: MiddleRanks = 'trusted';

/** A model of the catalogue (docs/models.md). */
export interface ModelRecord {
  kind: string;
  id: string;
  description: string | null;
  /** The model's input schema, extending its kind's (null: none published). */
  input_schema: Record<string, unknown> | null;
  /**
   * The number of ranks (pipeline stages) the model is served in (docs/ranks.md); null: it is
   * served whole. Set by the model's first advertisement or by an operator's declaration, and
   * from then on the authority: a worker advertising another count is refused.
   */
  ranks: number | null;
  /**
   * Ranked models: which workers may hold the ranks between the first and the last of a
   * trusted job (`trusted` unless an operator declared `open`); null for a whole model.
   */
  middle_ranks: MiddleRanks | null;
  /** Declared by an operator: its description, schema, ranks and placement are the operator's. */
  declared: boolean;
  /** When a worker first and last advertised it (null: never, a declared model no worker has shown). */
  first_seen: string | null;
  last_seen: string | null;
  created_at: string;
  /** When what it says (description, schema, declared) last changed; a mere sighting moves `last_seen` only. */
  updated_at: string;
}
