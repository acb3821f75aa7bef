import type { EngineContext, EngineResult } from '../engines/types.js';
import { DELTA_SEQ_PROTOCOL, USAGE_PROTOCOL, MAX_LOG_LINE, MAX_OUTPUT_DELTA, MAX_PROGRESS_MESSAGE, type WorkerFrame } from '../protocol/index.js';
import type { ReceiptSubject } from './attestation.js';
import type { Connection, IncomingFrame } from './gateway-connection.js';
import { LeaseInputFiles } from './input-files.js';
import { abortError, checkResult, chunks, cut, failureOf, finalReport, type Outcome } from './lease-outcome.js';
import { newLeaseState, parseLease, type AbortCause, type Answer, type LeaseState, type ReportBody } from './lease-state.js';
import { RankStream } from './rank-stream.js';
import { uploadArtifacts } from './upload.js';
import type { EmitWorkerEvent } from './worker-events.js';
import { handlerFor, type WorkerSettings } from './worker-options.js';

/** Frames held per lease while it moves to another instance; beyond, log lines are dropped. */
const MAX_HELD_FRAMES = 1_000;

export interface LeaseRunnerContext {
  /** Waiting leases start only while the worker runs: a stopping worker lets them go back with the socket. */
  mayStart(): boolean;
  send(conn: Connection, frame: WorkerFrame): boolean;
  /** A rank lease's binary frame; resolves once written to the socket (the pipeline's back-pressure). */
  sendBinary(conn: Connection, frame: Buffer): Promise<void>;
  signReceipt(lease: LeaseState, artifacts: ReceiptSubject['artifacts']): Promise<string>;
  /** An answer came on a socket the leases are leaving: the move waits for the last one. */
  answeredWhileMoving(conn: Connection): void;
  /** A lease ended: the socket may now close (stopping, drained) and the worker stop. */
  settled(): void;
  /** A lease failed because the backend did not answer (`upstream_unavailable`), or one succeeded. */
  backendFailed(message: string): void;
  backendAnswered(): void;
  emit: EmitWorkerEvent;
}

/**
 * Runs the leases: waits for a free slot, calls the handler, streams its progress, log lines
 * and output, uploads its artifacts and reports the outcome, then waits for the gateway's
 * answer. Every frame of a lease is answered in order, so the runner counts them: a frame the
 * gateway could not take (`unavailable`) goes again, and the final report waits for the answers
 * to the frames before it.
 */
export class LeaseRunner {
  readonly leases = new Map<string, LeaseState>();
  private readonly pending: LeaseState[] = [];
  /** Handler calls (and their uploads) in flight, including ones of lost connections still winding down. */
  private runningNow = 0;

  constructor(
    private readonly settings: WorkerSettings,
    private readonly ctx: LeaseRunnerContext,
  ) {}

  get busy(): number {
    return this.runningNow;
  }

  onLease(conn: Connection, frame: IncomingFrame): void {
    const info = parseLease(frame);
    if (!info) {
      this.settings.log.error('ignoring a malformed lease frame', { lease_id: frame.lease_id });
      return;
    }
    const lease = newLeaseState(info, conn);
    // Made now, not when the handler starts: frames for the lease may come while it waits for a slot.
    if (info.rank) lease.rank = new RankStream(info, info.rank, lease.controller.signal, (data) => this.ctx.sendBinary(lease.conn, data), this.settings.log);
    this.leases.set(info.lease_id, lease);
    conn.leases.add(info.lease_id);
    this.settings.log.debug('lease', { lease_id: info.lease_id, run_id: info.run_id, kind: info.kind, attempt: info.attempt });
    this.ctx.emit('lease', info);
    this.pending.push(lease);
    this.pump();
  }

  /** Starts waiting leases while slots are free (not while stopping: those go back with the socket). */
  pump(): void {
    while (this.ctx.mayStart() && this.runningNow < this.settings.slots && this.pending.length) {
      const lease = this.pending.shift()!;
      if (lease.phase !== 'pending' || (lease.conn.closed && !lease.moving)) continue;
      void this.run(lease);
    }
  }

  private async run(lease: LeaseState): Promise<void> {
    const { info, controller } = lease;
    lease.phase = 'running';
    this.runningNow++;
    let outcome: Outcome;
    // Fetched on the handler's demand; deleted when the run ends, however it ends.
    const inputs = new LeaseInputFiles(info.files ?? {}, info.upload_token, controller.signal, this.settings.inputFiles);
    try {
      const handler = handlerFor(this.settings.handler, info.kind);
      if (!handler) throw Object.assign(new Error(`this worker has no handler for ${info.kind}`), { code: 'unsupported_kind', retryable: true });
      const ctx: EngineContext = {
        runId: info.run_id,
        signal: controller.signal,
        progress: (p, message) => this.progress(lease, p, message),
        log: (line) => {
          if (lease.phase !== 'running' || lease.cause) return;
          // Behind the text written before it, as the handler wrote them.
          this.flushOutput(lease);
          this.sendLease(lease, { type: 'log', line: cut(String(line), MAX_LOG_LINE) });
        },
        output: (delta) => {
          if (lease.phase !== 'running' || lease.cause) return;
          for (const part of chunks(String(delta), MAX_OUTPUT_DELTA)) this.output(lease, part);
        },
        inputFile: (field) => inputs.get(String(field)),
        ...(lease.rank ? { rank: lease.rank.context } : {}),
      };
      const result = checkResult(await handler(info.kind, info.input, ctx));
      if (lease.cause) throw abortError('aborted');
      if (lease.rank && !lease.rank.context.last) {
        // A rank before the last hands its work on in frames; the run's output is the last rank's.
        await lease.rank.finish(result);
        outcome = { type: 'complete', output: { urls: [] } };
      } else {
        await lease.rank?.end();
        outcome = await this.complete(lease, result);
      }
    } catch (err) {
      outcome = { type: 'fail', error: failureOf(lease.cause, err) };
    } finally {
      lease.rank?.dispose();
      await inputs.dispose();
      this.runningNow--;
    }
    if (!lease.cause) {
      if (outcome.type === 'complete') this.ctx.backendAnswered();
      else if (outcome.error.code === 'upstream_unavailable') this.ctx.backendFailed(outcome.error.message);
    }
    this.flushProgress(lease, false);
    this.flushOutput(lease);
    await this.report(lease, outcome);
    this.pump();
    this.ctx.settled();
  }

  /** Uploads the artifacts and makes the `complete` outcome, with a receipt for a private lease. */
  private async complete(lease: LeaseState, result: EngineResult): Promise<Outcome> {
    const { info, controller } = lease;
    const { urls, signed } = await uploadArtifacts(info, result.artifacts, { ...this.settings.upload, signal: controller.signal });
    if (lease.cause) throw abortError('aborted');
    const receipt = info.tier === 'private' ? await this.ctx.signReceipt(lease, signed) : undefined;
    return { type: 'complete', output: { ...(result.extra ?? {}), urls }, ...(receipt ? { receipt } : {}), ...(result.usage ? { usage: result.usage } : {}) };
  }

  /** Sends the final report (unless the lease is lost, stale or its pipeline ended) and waits for the gateway's answer. */
  private async report(lease: LeaseState, outcome: Outcome): Promise<void> {
    const { info } = lease;
    const { log } = this.settings;
    if (lease.cause === 'canceled') outcome = { type: 'fail', error: failureOf(lease.cause, null) };
    // The gateway ended the lease with its pipeline: a report would be refused as stale.
    if (lease.cause === 'pipeline_ended') return this.drop(lease, lease.pipelineEnded ?? 'the pipeline ended', 'info');
    if (lease.cause === 'disconnected' || lease.cause === 'stale' || (lease.conn.closed && !lease.moving)) {
      return this.drop(lease, lease.lostInMove ?? (lease.cause === 'stale' ? 'the gateway said the lease is stale' : 'the connection was lost'));
    }
    const final = finalReport(info, outcome);
    const frame = final.frame;
    outcome = final.outcome;

    lease.phase = 'reporting';
    const answer = await new Promise<Answer>((resolve) => {
      lease.onFinalAnswer = (a) => {
        clearTimeout(lease.finalTimer);
        lease.onFinalAnswer = undefined;
        resolve(a);
      };
      lease.finalFrame = frame;
      this.sendFinal(lease);
    });
    lease.phase = 'done';
    this.forget(lease);
    if (answer.ok) {
      if (outcome.type === 'complete') {
        log.info('completed', { lease_id: info.lease_id, run_id: info.run_id, kind: info.kind, urls: outcome.output.urls.length });
        this.ctx.emit('completed', info, outcome.output);
      } else {
        log[outcome.error.code === 'canceled' ? 'info' : 'warn']('failed', { lease_id: info.lease_id, run_id: info.run_id, kind: info.kind, code: outcome.error.code, retryable: outcome.error.retryable, message: outcome.error.message });
        this.ctx.emit('failed', info, outcome.error);
      }
    } else {
      // A rank that reported as its pipeline ended: the refusal is expected.
      log[lease.pipelineEnded ? 'info' : 'warn'](`the gateway did not take the ${frame.type} report`, { lease_id: info.lease_id, run_id: info.run_id, code: answer.code, message: answer.message });
      this.ctx.emit('dropped', info, `${frame.type} not acknowledged: ${answer.code}: ${answer.message}`);
    }
  }

  /** Sends the final report now, or once the lease is resumed if it is moving; then waits for the answer. */
  sendFinal(lease: LeaseState): void {
    if (lease.moving) return;
    clearTimeout(lease.finalTimer);
    // Not before the earlier frames of the lease are answered: one the gateway could not take
    // (`unavailable`) goes again, and behind a final report it already took it would come too
    // late (the lease has ended) and be lost. Waiting costs a round trip at the end of a lease.
    if (lease.unanswered.length > 0 || lease.resend.length > 0) {
      lease.finalHeld = true;
      // An earlier answer that never comes (an error frame without a lease id) holds it no longer than this.
      lease.finalTimer = setTimeout(() => this.sendHeldFinal(lease, true), this.settings.reportTimeoutMs);
      return;
    }
    this.sendHeldFinal(lease, true);
  }

  private sendHeldFinal(lease: LeaseState, now: boolean): void {
    if (lease.moving || (!now && (lease.unanswered.length > 0 || lease.resend.length > 0))) return;
    clearTimeout(lease.finalTimer);
    lease.finalHeld = false;
    const frame = lease.finalFrame!;
    if (!this.sendLease(lease, frame)) return lease.onFinalAnswer?.({ ok: false, code: 'disconnected', message: 'the connection was lost' });
    lease.finalIndex = lease.sent;
    lease.finalType = String(frame.type);
    const { reportTimeoutMs } = this.settings;
    lease.finalTimer = setTimeout(() => lease.onFinalAnswer?.({ ok: false, code: 'no_answer', message: `no answer from the gateway in ${reportTimeoutMs} ms` }), reportTimeoutMs);
  }

  /**
   * Coalescing: while an output frame of the lease waits for its answer, later deltas join the
   * next frame, which leaves when the answer comes. No timer: at low load each delta goes at once,
   * under load one frame per round trip carries what piled up meanwhile. A frame never exceeds
   * the protocol's delta limit, and a delta (already cut to it) is never split across frames.
   */
  private output(lease: LeaseState, part: string): void {
    if (lease.coalesced !== undefined && lease.coalesced.length + part.length > MAX_OUTPUT_DELTA) this.flushOutput(lease);
    if (lease.coalesced === undefined && (lease.moving || !outputInFlight(lease))) {
      this.sendLease(lease, { type: 'output', delta: part, seq: ++lease.outputSeq });
      return;
    }
    lease.coalesced = (lease.coalesced ?? '') + part;
  }

  /** Sends the deltas waiting to be coalesced, as one frame. */
  flushOutput(lease: LeaseState): void {
    const delta = lease.coalesced;
    if (delta === undefined) return;
    lease.coalesced = undefined;
    this.sendLease(lease, { type: 'output', delta, seq: ++lease.outputSeq });
  }

  /** Sends a lease frame, or holds it while the lease moves to another instance. */
  sendLease(lease: LeaseState, frame: ReportBody): boolean {
    if (lease.moving) {
      if (lease.held.length < MAX_HELD_FRAMES) lease.held.push(frame);
      else this.settings.log.warn('too many frames held while moving; dropping one', { lease_id: lease.info.lease_id, type: frame.type });
      return true;
    }
    if (lease.conn.closed) return false;
    // An instance older than protocol 4 (7 for `usage`) refuses a field it does not know.
    const wire = frame.type === 'output' && lease.conn.protocol < DELTA_SEQ_PROTOCOL ? { type: frame.type, delta: frame.delta } : frame.type === 'complete' && lease.conn.protocol < USAGE_PROTOCOL ? { ...frame, usage: undefined } : frame;
    if (!this.ctx.send(lease.conn, { ...wire, lease_id: lease.info.lease_id, fence: lease.info.fence })) return false;
    lease.sent++;
    lease.unanswered.push(frame);
    return true;
  }

  /** An ack or an error naming a lease. Answers come in the order the frames were sent. */
  onAnswer(leaseId: unknown, answer: Answer): void {
    const lease = typeof leaseId === 'string' ? this.leases.get(leaseId) : undefined;
    if (!lease) return;
    lease.answered++;
    const frame = lease.unanswered.shift();
    if (lease.conn.moving) queueMicrotask(() => this.ctx.answeredWhileMoving(lease.conn));
    if (!answer.ok && answer.code === 'unavailable' && frame) return this.sendAgainLater(lease, frame);
    lease.outageRetries = 0;
    if (lease.coalesced !== undefined && !outputInFlight(lease)) this.flushOutput(lease);
    if (lease.finalHeld && !lease.moving) this.sendHeldFinal(lease, false);
    if (!answer.ok && answer.code === 'stale_lease' && lease.phase !== 'reporting') {
      this.settings.log.warn('the gateway says this lease is stale; dropping its work', { lease_id: lease.info.lease_id, run_id: lease.info.run_id });
      this.abortLease(lease, 'stale');
      if (lease.phase === 'pending') this.drop(lease, 'the gateway said the lease is stale');
      return;
    }
    if (lease.finalIndex === undefined) return;
    // The answer to the final report is the last one; an ack naming it is enough even if an
    // earlier answer went missing (an `internal` error frame carries no lease id).
    if (lease.answered >= lease.finalIndex || (answer.ok && answer.of === lease.finalType)) lease.onFinalAnswer?.(answer);
  }

  /**
   * The gateway could not reach its datastore for this frame (a passing outage): the frame goes
   * again after a pause that grows while the answers stay `unavailable`, until it is answered
   * otherwise. The final report's wait for an answer starts over with it.
   */
  private sendAgainLater(lease: LeaseState, frame: ReportBody): void {
    const final = frame === lease.finalFrame;
    // An outage does not count against the wait for the final report's answer, held or sent.
    if (final || lease.finalHeld) clearTimeout(lease.finalTimer);
    if (final) lease.finalIndex = undefined;
    lease.resend.push(frame);
    if (lease.resendTimer) return;
    const delay = Math.min(100 * 2 ** lease.outageRetries++, 2_000);
    this.settings.log.warn('the gateway cannot reach its datastore; sending the frames again', { lease_id: lease.info.lease_id, type: frame.type, in_ms: delay });
    const conn = lease.conn;
    lease.resendTimer = setTimeout(() => {
      lease.resendTimer = undefined;
      const frames = lease.resend.splice(0);
      if (this.leases.get(lease.info.lease_id) !== lease || lease.conn !== conn) return;
      // In the order first sent: a log line still arrives before the report that ends the lease.
      for (const f of frames) {
        if (f !== lease.finalFrame) this.sendLease(lease, f);
      }
      // Behind the frames sent again, and only once they are answered.
      if (lease.finalHeld || frames.includes(lease.finalFrame!)) this.sendFinal(lease);
    }, delay);
    conn.timers.push(lease.resendTimer);
  }

  onCancel(frame: IncomingFrame): void {
    const lease = typeof frame.lease_id === 'string' ? this.leases.get(frame.lease_id) : undefined;
    if (!lease) return;
    const message = typeof frame.message === 'string' ? frame.message : '';
    // The gateway has ended the lease already (its pipeline, or its attempt's timeout_s): nothing is reported.
    if (frame.reason === 'pipeline_ended') return this.pipelineEnded(lease, `the pipeline ended${message ? `: ${message}` : ''}`);
    if (frame.reason === 'timed_out') return this.pipelineEnded(lease, `the attempt timed out${message ? `: ${message}` : ''}`);
    this.settings.log.info('canceled by the caller', { lease_id: lease.info.lease_id, run_id: lease.info.run_id });
    if (lease.phase === 'pending') {
      lease.cause = 'canceled';
      lease.phase = 'running';
      const i = this.pending.indexOf(lease);
      if (i >= 0) this.pending.splice(i, 1);
      void this.report(lease, { type: 'fail', error: failureOf(lease.cause, null) }).then(() => this.ctx.settled());
      return;
    }
    if (lease.phase === 'running') this.abortLease(lease, 'canceled');
  }

  /**
   * The gateway ended this lease already (a rank lease's pipeline ended, or the attempt ran past
   * its timeout_s): the handler is aborted and nothing is reported (it would be refused). */
  private pipelineEnded(lease: LeaseState, why: string): void {
    lease.pipelineEnded = why;
    this.settings.log.info(`${why}: dropping the lease`, { lease_id: lease.info.lease_id, run_id: lease.info.run_id });
    if (lease.phase !== 'pending') return this.abortLease(lease, 'pipeline_ended');
    lease.cause = 'pipeline_ended';
    this.drop(lease, lease.pipelineEnded, 'info');
    this.ctx.settled();
  }

  /** Its socket closed and it is not moving: the handler stops, and nothing more is reported. */
  lostWithConnection(lease: LeaseState): void {
    this.abortLease(lease, 'disconnected');
    if (lease.phase === 'pending') this.drop(lease, 'the connection closed before it started');
    else if (lease.phase === 'reporting') lease.onFinalAnswer?.({ ok: false, code: 'disconnected', message: 'the connection closed before the gateway answered' });
  }

  abortLease(lease: LeaseState, cause: AbortCause): void {
    if (lease.phase === 'done' || lease.phase === 'reporting') return;
    lease.cause ??= cause;
    const messages: Record<AbortCause, string> = {
      canceled: 'the job was canceled',
      stale: 'the lease is no longer held by this worker',
      disconnected: 'the connection to the gateway was lost',
      stopping: 'the worker is stopping',
      pipeline_ended: 'the pipeline ended',
    };
    if (!lease.controller.signal.aborted) lease.controller.abort(abortError(messages[cause]));
    clearTimeout(lease.progressTimer);
    lease.pendingProgress = null;
  }

  drop(lease: LeaseState, reason: string, level: 'warn' | 'info' = 'warn'): void {
    if (lease.phase === 'done') return;
    lease.phase = 'done';
    const i = this.pending.indexOf(lease);
    if (i >= 0) this.pending.splice(i, 1);
    this.forget(lease);
    this.settings.log[level]('lease dropped', { lease_id: lease.info.lease_id, run_id: lease.info.run_id, reason });
    this.ctx.emit('dropped', lease.info, reason);
  }

  private forget(lease: LeaseState): void {
    clearTimeout(lease.progressTimer);
    this.leases.delete(lease.info.lease_id);
    lease.conn.leases.delete(lease.info.lease_id);
  }

  private progress(lease: LeaseState, p: number, message?: string): void {
    if (lease.phase !== 'running' || lease.cause) return;
    if (typeof p !== 'number' || Number.isNaN(p)) return;
    lease.pendingProgress = { progress: Math.min(1, Math.max(0, p)), ...(typeof message === 'string' ? { message: cut(message, MAX_PROGRESS_MESSAGE) } : {}) };
    if (lease.progressTimer) return;
    const wait = lease.lastProgressAt + this.settings.progressIntervalMs - Date.now();
    if (wait <= 0) this.flushProgress(lease, true);
    else lease.progressTimer = setTimeout(() => this.flushProgress(lease, true), wait);
  }

  /** Sends the latest progress (send) or forgets it (the final report says it all). */
  private flushProgress(lease: LeaseState, send: boolean): void {
    clearTimeout(lease.progressTimer);
    lease.progressTimer = undefined;
    const p = lease.pendingProgress;
    lease.pendingProgress = null;
    if (!send || !p || lease.phase !== 'running' || lease.cause) return;
    lease.lastProgressAt = Date.now();
    this.flushOutput(lease);
    this.sendLease(lease, { type: 'progress', ...p });
  }
}

/** An output frame of the lease is sent and not answered yet, or waits to go again. */
function outputInFlight(lease: LeaseState): boolean {
  return lease.resend.length > 0 || lease.unanswered.some((f) => f.type === 'output');
}
