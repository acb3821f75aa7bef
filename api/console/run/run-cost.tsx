import { Fragment } from 'preact';
import type { JobCost, JobUsage } from '../../../sdk/client/index.js';

const USAGE_LABELS: Record<string, string> = { input_tokens: 'Input tokens', output_tokens: 'Output tokens', seconds: 'Seconds of output', images: 'Images' };

const credits = (n: number) => `${n} credit${n === 1 ? '' : 's'}`;

/** Credits held and taken (docs/jobs.md, "Cost"), and what the worker said the run used. */
export function RunCost({ cost, usage }: { cost: JobCost | undefined; usage: JobUsage | null | undefined }) {
  const used = Object.entries(usage ?? {}).filter(([, v]) => v != null);
  return (
    <section aria-labelledby="cost-heading">
      <h2 id="cost-heading">Cost</h2>
      <dl class="facts">
        <dt>Reserved</dt>
        <dd class="cost-reserved">
          {cost ? credits(cost.reserved) : '—'} <span class="muted">(held at submission: the most it can cost)</span>
        </dd>
        <dt>Charged</dt>
        <dd class="cost-charged">{cost?.charged == null ? <span class="muted">not yet (charged when it ends)</span> : credits(cost.charged)}</dd>
        {used.map(([k, v]) => (
          <Fragment key={k}>
            <dt>{USAGE_LABELS[k] ?? k}</dt>
            <dd>{String(v)}</dd>
          </Fragment>
        ))}
      </dl>
      {used.length === 0 ? <p class="hint">The worker reported no usage{cost?.charged == null ? ' yet' : ''}.</p> : null}
    </section>
  );
}
