import '../styles/account.css';
import { ApiKeysSection } from '../account/api-keys-section.js';
import { getAccount } from '../account/account-api.js';
import { BotsSection } from '../account/bots-section.js';
import { CreditsSection } from '../account/credits-section.js';
import { FilesSection } from '../account/files-section.js';
import { ToolsSection } from '../account/tools-section.js';
import { WorkerTokenSection } from '../account/worker-token-section.js';
import { PageTitle } from '../components/common.js';
import { client } from '../lib/gateway.js';
import { useAsync } from '../lib/use-async.js';

/** Credits, API keys, worker tokens, files, tools and bots. */
export function AccountPage() {
  const account = useAsync(getAccount, []);
  const caps = useAsync(() => client().capabilities(), []);
  return (
    <section class="account-page">
      <PageTitle>Account</PageTitle>
      {account.data ? (
        <p class="muted">
          {account.data.name} · <span class="mono">{account.data.id}</span>
        </p>
      ) : null}
      <nav aria-label="Account sections" class="account-toc">
        <a href="#credits-title">Credits</a> <a href="#keys-title">API keys</a> <a href="#workers-title">Worker tokens</a>{' '}
        <a href="#files-title">Files</a> <a href="#tools-title">Tools</a> <a href="#bots-title">Bots</a>
      </nav>
      <CreditsSection account={account} />
      <ApiKeysSection />
      <WorkerTokenSection kinds={caps.data?.kinds.map((k) => k.kind) ?? []} />
      <FilesSection />
      <ToolsSection />
      <BotsSection />
    </section>
  );
}
