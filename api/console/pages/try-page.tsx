import { Link, Loading, ErrorNote, PageTitle } from '../components/common.js';
import { client } from '../lib/gateway.js';
import { kindTitle } from '../lib/format.js';
import { useAsync } from '../lib/use-async.js';

/** Try a kind: the live catalogue, then the form of the kind picked. */
export function TryPage({ kind }: { kind?: string }) {
  const caps = useAsync(() => client().capabilities(), []);
  return (
    <section>
      <PageTitle>{kind ? kindTitle(kind) : 'Try a kind'}</PageTitle>
      {caps.loading && !caps.data ? <Loading what="the kinds" /> : null}
      <ErrorNote error={caps.error} />
      <ul class="kind-list">
        {caps.data?.kinds.map((k) => (
          <li key={k.kind}>
            <Link to={`/kinds/${k.kind}`}>{k.kind}</Link> {k.description}
          </li>
        ))}
      </ul>
    </section>
  );
}
