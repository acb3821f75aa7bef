import { ErrorNote, Link, Loading, PageTitle } from '../components/common.js';
import { kindTitle } from '../lib/format.js';
import { useLocation } from '../lib/router.js';
import { KindForm } from '../try/kind-form.js';
import { formatPrice, isWaiting, type KindInfo, type KindLoad } from '../try/kind-info.js';
import { KindList } from '../try/kind-list.js';
import { useLiveKinds } from '../try/use-kinds.js';
import '../styles/try.css';

/** Try a kind: the live catalogue at `/`, and the form of one kind at `/kinds/<kind>`. */
export function TryPage({ kind }: { kind?: string }) {
  const { kinds, load, error } = useLiveKinds();
  const { query } = useLocation();
  const info = kind ? kinds?.find((k) => k.kind === kind) : undefined;
  return (
    <section>
      <PageTitle>{kind ? `Try ${kindTitle(kind)}` : 'Try a kind'}</PageTitle>
      {!kinds && !error ? <Loading what="the kinds" /> : null}
      <ErrorNote error={error} />
      {kinds && !kind ? (
        <>
          <p class="muted">
            Every kind the gateway runs, with the workers serving it now (refreshed every few seconds). Pick one to fill its form.
          </p>
          <FleetSummary kinds={kinds} />
          <KindList kinds={kinds} load={load} />
        </>
      ) : null}
      {kinds && kind && !info ? (
        <p class="note note-error" role="alert">
          The gateway has no kind {kind}. <Link to="/">See the kinds</Link>.
        </p>
      ) : null}
      {info ? (
        <>
          <KindHeader kind={info} load={load.get(info.kind)} />
          <KindForm key={info.kind} kind={info} query={query} />
        </>
      ) : null}
    </section>
  );
}

/** How many kinds wait for workers: announced when it changes, not at every refresh. */
function FleetSummary({ kinds }: { kinds: KindInfo[] }) {
  const waiting = kinds.filter(isWaiting).length;
  return (
    <p role="status" class="fleet-summary">
      {kinds.length} kinds; {waiting ? `${waiting} waiting for workers` : 'all served by a worker now'}.
    </p>
  );
}

function KindHeader({ kind, load }: { kind: KindInfo; load?: KindLoad }) {
  const t = kind.workers_by_tier;
  return (
    <div class="kind-header">
      <p>
        <span class="mono">{kind.kind}</span> · {kind.description}
      </p>
      <p class="row">
        <span>{formatPrice(kind.price)}</span>
        <span>
          {kind.workers} worker{kind.workers === 1 ? '' : 's'} (open {t.open}, trusted {t.trusted}, private {t.private})
        </span>
        <span>{load?.queued ?? 0} queued</span>
        <Link to="/">All kinds</Link>
      </p>
      {isWaiting(kind) ? (
        <p class="note note-warn" role="status">
          Waiting for workers: no worker serves this kind now. A job you submit queues until one connects.
        </p>
      ) : null}
    </div>
  );
}
