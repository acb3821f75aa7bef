import { ErrorNote, Loading } from '../components/common.js';
import type { AsyncState } from '../lib/use-async.js';
import type { AccountInfo } from './account-api.js';

const n = (v: number) => v.toLocaleString();

/** Credits (GET /v1/account): what the account can spend, what runs in flight hold, and its monthly budget. */
export function CreditsSection({ account }: { account: AsyncState<AccountInfo> }) {
  const a = account.data;
  return (
    <section class="account-section" aria-labelledby="credits-title">
      <h2 id="credits-title">Credits</h2>
      {account.loading && !a ? <Loading what="the balance" /> : null}
      <ErrorNote error={account.error} />
      {a ? (
        <>
          <dl class="facts credits">
            <dt>Available</dt>
            <dd data-credits="available">{n(a.credits)}</dd>
            <dt>Reserved</dt>
            <dd data-credits="reserved">{n(a.reserved)}</dd>
            <dt>Monthly budget</dt>
            <dd data-credits="budget">{a.budget ? `${n(a.budget.spent)} of ${n(a.budget.monthly)} spent in ${a.budget.period}` : 'none set'}</dd>
          </dl>
          <p class="hint">
            Available is what runs can still take; reserved is held by runs in flight until they end (a run is charged what it used and the
            rest comes back). An operator adds credits.
          </p>
          <button type="button" class="button-small" onClick={account.reload}>
            Refresh
          </button>
        </>
      ) : null}
    </section>
  );
}
