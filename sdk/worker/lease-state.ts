import { MAX_RANKS, type CompleteFrame, type FailFrame, type LeaseInfo, type LeaseInputFile, type LeaseRank, type LeaseReport, type Tier, type Unaddressed } from '../protocol/index.js';
import type { ReceiptSubject } from './attestation.js';
import type { Connection } from './gateway-connection.js';
import { isRecord } from './is-record.js';
import type { RankStream } from './rank-stream.js';

/** `pipeline_ended`: a rank lease the gateway has ended already (docs/worker-protocol.md, "Ranks"), so nothing is reported. */
export type AbortCause = 'canceled' | 'stale' | 'disconnected' | 'stopping' | 'pipeline_ended';

/** The gateway's answer to one lease frame: an `ack`, or an `error` naming the lease. */
export type Answer = { ok: true; of: string } | { ok: false; code: string; message: string };

/** A lease frame as the worker makes it: addressed to its lease only when it goes out, as it may be held meanwhile. */
export type ReportBody = Unaddressed<LeaseReport>;

/** The report that ends a lease. */
export type FinalReport = Unaddressed<CompleteFrame | FailFrame>;

/**
 * One lease the worker holds, from its lease frame to the gateway's answer to its final report.
 * Shared by the runner (which runs and reports it) and the mover (which carries it to another
 * gateway instance), so its frame bookkeeping survives a change of socket.
 */
export interface LeaseState {
  info: LeaseInfo;
  conn: Connection;
  controller: AbortController;
  cause: AbortCause | null;
  phase: 'pending' | 'running' | 'reporting' | 'done';
  /** Frames sent for this lease, and answers (ack or error) received for them. */
  sent: number;
  answered: number;
  /** The frames sent on this connection and not answered yet, oldest first (answers come in order). */
  unanswered: ReportBody[];
  /** The number of the lease's last output frame (each keeps its `seq` however often it is sent). */
  outputSeq: number;
  /**
   * Output frames sent on a socket that closed before answering them, numbered on both ends:
   * maybe logged, maybe not, they go again first on the socket the lease moves to if it numbers
   * them too (the gateway drops the ones it logged). Acked frames are never among them.
   */
  unacked: ReportBody[];
  /** Deltas written while an output frame is in flight, to leave as one frame (LeaseRunner.output). */
  coalesced?: string;
  /** `unavailable` answers in a row: the resend waits longer each time. */
  outageRetries: number;
  /** Frames answered `unavailable`, sent again together, in their order, when `resendTimer` fires. */
  resend: ReportBody[];
  resendTimer?: NodeJS.Timeout;
  /** Set when the final report is sent: resolved by the answer to frame number `finalIndex`. */
  finalIndex?: number;
  finalType?: string;
  onFinalAnswer?: (a: Answer) => void;
  lastProgressAt: number;
  pendingProgress: { progress: number; message?: string } | null;
  progressTimer?: NodeJS.Timeout;
  /** Between connections (a move to another instance): its frames are held until it is resumed. */
  moving: boolean;
  held: ReportBody[];
  /** The final report, kept so it can go out (again) on the connection the lease moves to. */
  finalFrame?: FinalReport;
  finalTimer?: NodeJS.Timeout;
  /** The final report waits for the answers to the lease's earlier frames (see LeaseRunner.sendFinal). */
  finalHeld?: boolean;
  /** Why a lease that did not survive a move was lost, for its `dropped` event. */
  lostInMove?: string;
  /** Private leases: what the receipt signs, to sign it again under a new worker id after a move. */
  receiptSubject?: ReceiptSubject;
  /** Rank leases (protocol 6): the frames to and from the ranks beside it. */
  rank?: RankStream;
  /** A rank lease whose pipeline the gateway ended (`cancel` with `reason: "pipeline_ended"`): why, for the log. */
  pipelineEnded?: string;
}

export function newLeaseState(info: LeaseInfo, conn: Connection): LeaseState {
  return {
    info,
    conn,
    controller: new AbortController(),
    cause: null,
    phase: 'pending',
    sent: 0,
    answered: 0,
    unanswered: [],
    outputSeq: 0,
    unacked: [],
    outageRetries: 0,
    resend: [],
    lastProgressAt: 0,
    pendingProgress: null,
    moving: conn.moving,
    held: [],
  };
}

/** The lease of a `lease` frame, or null when a field the worker needs is missing. */
export function parseLease(frame: Record<string, unknown>): LeaseInfo | null {
  const f = frame as Partial<LeaseInfo>;
  if (typeof f.lease_id !== 'string' || typeof f.fence !== 'number' || typeof f.run_id !== 'string' || typeof f.kind !== 'string') return null;
  if (typeof f.upload_url !== 'string' || typeof f.upload_token !== 'string') return null;
  const rank = f.rank === undefined ? undefined : parseRank(f.rank);
  if (rank === null) return null;
  return {
    lease_id: f.lease_id,
    fence: f.fence,
    run_id: f.run_id,
    kind: f.kind,
    tier: (f.tier ?? 'open') as Tier,
    attempt: typeof f.attempt === 'number' ? f.attempt : f.fence,
    input: isRecord(f.input) ? f.input : {},
    ...(typeof f.input_sha256 === 'string' ? { input_sha256: f.input_sha256 } : {}),
    ...(isRecord(f.input_files) ? { input_files: Object.fromEntries(Object.entries(f.input_files).map(([field, h]) => [field, String(h)])) } : {}),
    upload_url: f.upload_url,
    upload_token: f.upload_token,
    ...(isRecord(f.files) ? { files: parseFiles(f.files, f.upload_url) } : {}),
    ...(rank ? { rank } : {}),
  };
}

/** A lease's `rank`, or null when it is not one: a rank lease the handler could not tell apart from a whole one must not run. */
function parseRank(value: unknown): LeaseRank | null {
  if (!isRecord(value)) return null;
  const { index, count, pipeline_id, model, workers } = value;
  if (!Number.isInteger(count) || (count as number) < 2 || (count as number) > MAX_RANKS) return null;
  if (!Number.isInteger(index) || (index as number) < 0 || (index as number) >= (count as number)) return null;
  if (typeof pipeline_id !== 'string' || typeof model !== 'string') return null;
  // Only for the handler's information (a private pipeline's receipt): a missing list is no reason to refuse the lease.
  const names = Array.isArray(workers) ? workers.map(String) : [];
  return { index: index as number, count: count as number, pipeline_id, model, workers: names };
}

/**
 * The lease's input files, by field. An entry that is not `{url, size, content_type, sha256}`
 * with an http(s) URL (relative ones resolve against `upload_url`) is left out: asking for it
 * then fails the run as `bad_input` rather than sending the upload token somewhere unexpected.
 */
function parseFiles(value: unknown, base: string): Record<string, LeaseInputFile> {
  const files: Record<string, LeaseInputFile> = Object.create(null);
  if (!isRecord(value)) return files;
  for (const [field, entry] of Object.entries(value)) {
    if (!isRecord(entry)) continue;
    const { url, size, content_type, sha256 } = entry;
    if (typeof url !== 'string' || typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) continue;
    if (typeof sha256 !== 'string' || !/^[0-9a-f]{64}$/i.test(sha256)) continue;
    let resolved: URL;
    try {
      resolved = new URL(url, base);
    } catch {
      continue;
    }
    if (resolved.protocol !== 'https:' && resolved.protocol !== 'http:') continue;
    files[field] = { url: resolved.href, size, content_type: typeof content_type === 'string' ? content_type : 'application/octet-stream', sha256: sha256.toLowerCase() };
  }
  return files;
}
