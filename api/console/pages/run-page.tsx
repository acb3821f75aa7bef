import { useEffect, useState } from 'preact/hooks';
import { ErrorNote, Loading, PageTitle } from '../components/common.js';
import { RunOutputs } from '../outputs/run-outputs.js';
import { AttestationPanel } from '../run/attestation-panel.js';
import { CancelRun } from '../run/cancel-run.js';
import { ConnectionNote } from '../run/connection-note.js';
import { QueueNote } from '../run/queue-note.js';
import { RunAttempts } from '../run/run-attempts.js';
import { RunCost } from '../run/run-cost.js';
import { RunError } from '../run/run-error.js';
import { RunFacts } from '../run/run-facts.js';
import { RunInput } from '../run/run-input.js';
import { RunLog, StreamedText } from '../run/run-log.js';
import { RunProgress } from '../run/run-progress.js';
import { useRun } from '../run/use-run.js';
import '../styles/run.css';

const LLM_KINDS = /^inference:llm:/;

/** One run, live: status, queue, progress, logs, streamed text, attempts, cost, proof, and its outputs. */
export function RunPage({ runId }: { runId: string }) {
  const r = useRun(runId);
  const job = r.job;
  const running = !!job && !job.terminal;
  useTicker(running);
  const queue = job?.status === 'queued' && r.queue?.status === 'queued' ? { ...r.queue, confidentiality: job.confidentiality } : null;
  // A succeeded run is done whatever its worker last reported (the SDK throttles progress frames).
  const progress = job?.status === 'succeeded' ? { progress: 1, message: 'Done.' } : (r.progress ?? (job?.progress != null ? { progress: job.progress } : undefined));
  return (
    <section class="run-page">
      <div class="run-head">
        <PageTitle>Run {runId}</PageTitle>
        {job && running ? <CancelRun runId={runId} onCanceled={r.setJob} /> : null}
      </div>
      {!job && !r.loadError ? <Loading what="the run" /> : null}
      <ErrorNote error={r.loadError} title="Could not load the run" />
      {job ? (
        <>
          <ConnectionNote connection={r.connection} retryInMs={r.retryInMs} error={r.streamError} />
          <div class="grid-2 run-top">
            <div class="card">
              <RunFacts job={job} />
            </div>
            <div class="card stack">
              {queue ? <QueueNote queue={queue} /> : null}
              <RunError job={job} />
              <RunProgress progress={progress} running={running} />
            </div>
          </div>
          {r.input ? <RunInput job={job} input={r.input} /> : null}
          {LLM_KINDS.test(job.kind) || r.text ? <StreamedText text={r.text} running={running} /> : null}
          <RunLog lines={r.logs} running={running} />
          {job.status === 'succeeded' ? <RunOutputs run={job} input={r.input} /> : null}
          {job.confidentiality === 'private' && job.attestation && r.input ? <AttestationPanel job={job} input={r.input} /> : null}
          <RunAttempts attempts={job.attempt_history ?? []} max={job.max_attempts} />
          <RunCost cost={job.cost} usage={job.usage} />
        </>
      ) : null}
    </section>
  );
}

/** Re-renders every second while the run lasts, so its durations count up. */
function useTicker(on: boolean): void {
  const [, setTick] = useState(0);
  useEffect(() => {
    if (!on) return;
    const t = setInterval(() => setTick((n) => n + 1), 1000);
    return () => clearInterval(t);
  }, [on]);
}
