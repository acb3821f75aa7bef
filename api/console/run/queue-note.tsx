import type { JobResult } from '../../../sdk/client/index.js';

type QueueState = Pick<JobResult, 'queue_position' | 'waiting_reason' | 'waiting_ranks' | 'confidentiality'>;

/** Why a queued run waits, in words (docs/api.md, the job object's `waiting_reason`). */
function reasonText(q: QueueState): string {
  const tier = q.confidentiality;
  switch (q.waiting_reason) {
    case 'no_worker_for_kind':
      return `No connected worker serves this kind at the ${tier} tier (or a stronger one). It starts when one connects.`;
    case 'no_worker_for_model':
      return `No connected worker at the ${tier} tier (or a stronger one) serves the model it asks for. It starts when one does.`;
    case 'no_worker_for_rank':
      return `Its model runs as a pipeline of ranks, and no worker can hold ${q.waiting_ranks?.length === 1 ? 'rank' : 'ranks'} ${(q.waiting_ranks ?? []).join(', ')} now.`;
    case 'backend_unavailable':
      return 'Every worker that serves it reports its backend (the inference server) down. It starts when one recovers.';
    case 'retry_backoff':
      return 'An attempt failed; the retry waits out its backoff before it is offered to a worker again.';
    case 'concurrency_limit':
      return 'Your account, API key or this kind already has as many runs running as its limit allows. It starts when one of them ends.';
    default:
      return 'Waiting for a free worker.';
  }
}

/** A queued run's place in the queue and why it waits. */
export function QueueNote({ queue }: { queue: QueueState }) {
  const pos = queue.queue_position;
  return (
    <div class="note queue-note" role="status">
      <p>
        <strong>{pos == null ? 'Queued.' : pos === 1 ? 'Queued: next in line.' : `Queued: position ${pos} in line.`}</strong>{' '}
        {reasonText(queue)}
      </p>
      {queue.waiting_reason ? (
        <p class="hint">
          Reason code: <code>{queue.waiting_reason}</code>
          {queue.waiting_ranks?.length ? (
            <>
              {' '}
              · waiting ranks: <code>{queue.waiting_ranks.join(', ')}</code>
            </>
          ) : null}
        </p>
      ) : null}
    </div>
  );
}
