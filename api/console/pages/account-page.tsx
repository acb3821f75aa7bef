import { PageTitle } from '../components/common.js';

/** Credits, API keys, worker tokens, files, tools and bots. */
export function AccountPage() {
  return (
    <section>
      <PageTitle>Account</PageTitle>
    </section>
  );
}
