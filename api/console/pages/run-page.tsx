import { ErrorNote, Loading, PageTitle, StatusBadge } from '../components/common.js';
import { client } from '../lib/gateway.js';
import { useAsync } from '../lib/use-async.js';
import { RunOutputs } from '../outputs/run-outputs.js';

/** One run, live: status, progress, logs, streamed text, attempts, cost, and its outputs. */
export function RunPage({ runId }: { runId: string }) {
  const run = useAsync(() => client().get(runId), [runId]);
  return (
    <section>
      <PageTitle>Run {runId}</PageTitle>
      {run.loading && !run.data ? <Loading what="the run" /> : null}
      <ErrorNote error={run.error} />
      {run.data ? <StatusBadge status={run.data.status} /> : null}
      {run.data?.status === 'succeeded' ? <RunOutputs run={run.data} /> : null}
    </section>
  );
}
