import type { ChaosHistory } from './history.js';

/** The most a run accepted before the fault ended may take to be seen terminal after it ended. */
export const RECOVERY_BOUND_S = 30;

/** One row of the table, plus every violation found, each saying which run and why. */
export interface ChaosVerdict {
  scenario: string;
  accepted: number;
  lost: number;
  twice: number;
  creditError: number;
  fiveXxOutside: number;
  sseViolations: number;
  recoverySeconds: number;
  violations: string[];
}

/**
 * The invariants of issue 30, checked over the recorded history only:
 * - lost: an accepted run (a 202 or an idempotent replay) that is not terminal at rest, missing
 *   from the account's runs, or seen terminal later than RECOVERY_BOUND_S after the fault ended;
 * - twice: a run whose log has more than one terminal `status` or `done`, or whose
 *   attempt_history has more than one attempt that ended without an error (two workers' results);
 *   an Idempotency-Key answered with two runs, or more runs in the account than answers named
 *   (plus unanswered submissions): one request made two runs;
 * - credit error: credits ≠ start − Σ charged over succeeded runs, reserved ≠ 0 at rest, or a
 *   run that is not succeeded yet charged something;
 * - 5xx outside outages: a submission answered 5xx outside every declared window;
 * - SSE: a follower saw an id twice or out of order, missed an id of the final log, or never
 *   saw `done` of a run that ended;
 * - recovery: seconds from the end of the last fault until every run accepted before it was
 *   seen terminal, and a new submission was accepted (bounded by RECOVERY_BOUND_S).
 */
export function checkHistory(h: ChaosHistory): ChaosVerdict {
  const violations: string[] = [];
  let lost = 0;
  for (const [id] of h.accepted) {
    const run = h.final.get(id);
    if (!run) {
      lost++;
      violations.push(`lost: ${id} was accepted but the account has no such run`);
    } else if (!run.terminal) {
      lost++;
      violations.push(`lost: ${id} was accepted and is still ${run.status} at rest`);
    }
  }

  let twice = 0;
  for (const run of h.final.values()) {
    const terminalStatuses = run.log.filter((e) => e.event === 'status' && e.terminal).length;
    const dones = run.log.filter((e) => e.event === 'done').length;
    const results = run.attemptHistory.filter((a) => a.ended_at !== null && a.error === null).length;
    if (terminalStatuses > 1 || dones > 1 || results > 1) {
      twice++;
      violations.push(`twice: ${run.runId} has ${terminalStatuses} terminal status events, ${dones} done events, ${results} attempts that ended with a result`);
    }
  }

  // One request, one run: a key answered with two runs, or runs no answer named (beyond the
  // submissions that never got one), are second runs of an idempotent submission.
  for (const [key, runs] of h.runsByKey) {
    if (runs.size > 1) {
      twice++;
      violations.push(`twice: Idempotency-Key ${key} was answered with ${runs.size} runs: ${[...runs].join(', ')}`);
    }
  }
  const unnamed = [...h.final.keys()].filter((id) => !h.accepted.has(id));
  if (unnamed.length > h.unanswered) {
    twice += unnamed.length - h.unanswered;
    violations.push(`twice: ${unnamed.length} runs of the account were never named in an answer (${h.unanswered} submissions went unanswered), e.g. ${unnamed.slice(0, 3).join(', ')}`);
  }

  let charged = 0;
  let creditError = 0;
  for (const run of h.final.values()) {
    if (run.status === 'succeeded') charged += run.charged ?? 0;
    else if (run.terminal && (run.charged ?? 0) !== 0) {
      creditError++;
      violations.push(`credit: ${run.runId} is ${run.status} yet charged ${run.charged}`);
    }
  }
  const expected = h.account.startCredits - charged;
  if (h.account.credits !== expected) {
    creditError++;
    violations.push(`credit: the account holds ${h.account.credits} credits; start ${h.account.startCredits} − charged ${charged} = ${expected}`);
  }
  if (h.account.reserved !== 0) {
    creditError++;
    violations.push(`credit: ${h.account.reserved} credits still reserved at rest`);
  }

  let fiveXxOutside = 0;
  for (const a of h.submits) {
    if (a.status < 500) continue;
    if (h.outages.some((w) => a.at >= w.from && a.at <= w.to)) continue;
    fiveXxOutside++;
    violations.push(`5xx: a submission was answered ${a.status} at +${((a.at - h.startedAt) / 1000).toFixed(1)} s, outside every outage window`);
  }

  let sseViolations = 0;
  for (const f of h.followers) {
    const run = h.final.get(f.runId);
    const problems: string[] = [];
    for (let i = 1; i < f.events.length; i++) {
      if (f.events[i].id <= f.events[i - 1].id) problems.push(`id ${f.events[i].id} after ${f.events[i - 1].id}`);
    }
    if (run?.terminal) {
      const seen = new Set(f.events.map((e) => e.id));
      const missed = run.log.filter((e) => !seen.has(e.id)).map((e) => e.id);
      if (missed.length) problems.push(`missed ids ${missed.join(',')}`);
      if (!f.sawDone) problems.push('never saw done');
    }
    if (problems.length) {
      sseViolations++;
      const seen = f.events.map((e) => `${e.id}:${e.event}@${e.connection}`).join(' ');
      const logged = (run?.log ?? []).map((e) => `${e.id}:${e.event}${e.status ? `(${e.status})` : ''}`).join(' ');
      violations.push(`sse: the follower of ${f.runId} (${f.resumes} resumes): ${problems.join('; ')} [saw ${seen}] [log ${logged}]`);
    }
  }

  const before = [...h.accepted].filter(([, at]) => at <= h.faultEndedAt).map(([id]) => id);
  let recoveredAt = h.faultEndedAt;
  for (const id of before) {
    const seen = h.final.get(id)?.terminalSeenAt;
    if (seen) recoveredAt = Math.max(recoveredAt, seen);
  }
  const firstAfter = Math.min(...[...h.accepted.values()].filter((at) => at > h.faultEndedAt));
  if (Number.isFinite(firstAfter)) recoveredAt = Math.max(recoveredAt, firstAfter);
  else violations.push('recovery: no submission was accepted after the fault ended');
  const recoverySeconds = (recoveredAt - h.faultEndedAt) / 1000;
  if (recoverySeconds > RECOVERY_BOUND_S) {
    violations.push(`recovery: ${recoverySeconds.toFixed(1)} s after the fault ended, over the ${RECOVERY_BOUND_S} s bound`);
  }
  if (h.unanswered > 0) violations.push(`unanswered: ${h.unanswered} submissions never got a definite answer`);

  return { scenario: h.scenario, accepted: h.accepted.size, lost, twice, creditError, fiveXxOutside, sseViolations, recoverySeconds, violations };
}

/** The table of issue 30, one row per verdict. */
export function formatTable(rows: ChaosVerdict[]): string {
  const head = ['scenario', 'accepted', 'lost', 'twice', 'credit error', '5xx outside outages', 'sse errors', 'recovery s', 'verdict'];
  const body = rows.map((r) => [r.scenario, r.accepted, r.lost, r.twice, r.creditError, r.fiveXxOutside, r.sseViolations, r.recoverySeconds.toFixed(1), r.violations.length ? 'FAIL' : 'ok'].map(String));
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...body.map(line)].join('\n');
}
