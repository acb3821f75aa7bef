import type { TierCounts } from '../../../sdk/client/index.js';
import { Link } from '../components/common.js';
import { kindTitle } from '../lib/format.js';
import { formatPrice, isWaiting, type KindInfo, type KindLoad } from './kind-info.js';

const TIERS: Array<keyof TierCounts> = ['open', 'trusted', 'private'];

/** The kinds of the fleet, each a card linking to its form, with the live numbers. */
export function KindList({ kinds, load }: { kinds: KindInfo[]; load: Map<string, KindLoad> }) {
  return (
    <ul class="kind-list" aria-label="Kinds">
      {kinds.map((k) => (
        <KindCard key={k.kind} kind={k} load={load.get(k.kind)} />
      ))}
    </ul>
  );
}

function KindCard({ kind: k, load }: { kind: KindInfo; load?: KindLoad }) {
  const waiting = isWaiting(k);
  const models = modelIds(k, load);
  return (
    <li class={`kind-card card${waiting ? ' kind-waiting' : ''}`} data-kind={k.kind}>
      <h2 class="kind-name">
        <Link to={`/kinds/${k.kind}`}>{kindTitle(k.kind)}</Link>
      </h2>
      <p class="kind-id mono">{k.kind}</p>
      <p class="kind-description">{k.description}</p>
      <p class="kind-state">
        {waiting ? (
          <span class="badge badge-waiting">Waiting for workers</span>
        ) : (
          <span class="badge badge-live">Live</span>
        )}{' '}
        {k.rollout === 'rolling_out' ? <span class="badge badge-rollout">Rolling out</span> : null}
      </p>
      <dl class="facts kind-facts">
        <dt>Price</dt>
        <dd data-fact="price">{formatPrice(k.price)}</dd>
        <dt>Workers</dt>
        <dd data-fact="workers">
          {k.workers} <span class="muted">({TIERS.map((t) => `${t} ${k.workers_by_tier[t]}`).join(', ')})</span>
        </dd>
        <dt>Queued</dt>
        <dd data-fact="queued">{load?.queued ?? 0}</dd>
        {models.length ? (
          <>
            <dt>Models</dt>
            <dd data-fact="models">{models.join(', ')}</dd>
          </>
        ) : null}
      </dl>
    </li>
  );
}

/** The kind's models: the catalogue's from capabilities, and any more the capacity answer names. */
function modelIds(k: KindInfo, load?: KindLoad): string[] {
  const ids = new Set((k.models ?? []).map((m) => m.id));
  for (const m of load?.models ?? []) ids.add(m.id);
  return [...ids];
}
