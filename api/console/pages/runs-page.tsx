import { PageTitle } from '../components/common.js';

/** The account's runs, newest first, filtered and paginated. */
export function RunsPage() {
  return (
    <section>
      <PageTitle>Runs</PageTitle>
    </section>
  );
}
