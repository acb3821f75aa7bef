import { Link, PageTitle } from '../components/common.js';

export function NotFoundPage() {
  return (
    <section>
      <PageTitle>Nothing here</PageTitle>
      <p>
        The console has no page at this address. <Link to="/">Try a kind</Link>, or see your <Link to="/runs">runs</Link>.
      </p>
    </section>
  );
}
