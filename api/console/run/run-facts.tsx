import type { JobResult } from '../../../sdk/client/index.js';
import { StatusBadge } from '../components/common.js';
import { formatDuration, formatTime } from '../lib/format.js';

const CONFIDENTIALITY: Record<string, string> = {
  open: 'open: any worker may run it',
  trusted: 'trusted: only workers of trusted operators',
  private: 'private: only attested confidential-computing workers, with a signed receipt',
};

/** What the run is and when things happened to it; the durations count up while it lasts. */
export function RunFacts({ job }: { job: JobResult }) {
  const waitedUntil = job.started_at ?? job.finished_at ?? null;
  return (
    <dl class="facts run-facts">
      <dt>Status</dt>
      <dd>
        <StatusBadge status={job.status} />
      </dd>
      <dt>Kind</dt>
      <dd class="mono">{job.kind}</dd>
      <dt>Confidentiality</dt>
      <dd>{CONFIDENTIALITY[job.confidentiality] ?? job.confidentiality}</dd>
      <dt>Class</dt>
      <dd>
        {job.class} (priority {job.priority})
      </dd>
      <dt>Created</dt>
      <dd>{formatTime(job.created_at)}</dd>
      <dt>Started</dt>
      <dd>
        {formatTime(job.started_at)}
        {job.started_at || job.terminal ? null : <span class="muted"> (not yet)</span>}
      </dd>
      <dt>Finished</dt>
      <dd>{formatTime(job.finished_at)}</dd>
      <dt>Waited</dt>
      <dd>
        {formatDuration(job.created_at, waitedUntil)}
        {waitedUntil ? null : <span class="muted"> so far</span>}
      </dd>
      <dt>Ran</dt>
      <dd>
        {job.started_at ? formatDuration(job.started_at, job.finished_at) : '—'}
        {job.started_at && !job.finished_at ? <span class="muted"> so far</span> : null}
      </dd>
      {job.expires_at && job.status === 'queued' ? (
        <>
          <dt>Expires if not started by</dt>
          <dd>{formatTime(job.expires_at)}</dd>
        </>
      ) : null}
      {job.timeout_at ? (
        <>
          <dt>This attempt times out at</dt>
          <dd>{formatTime(job.timeout_at)}</dd>
        </>
      ) : null}
    </dl>
  );
}
