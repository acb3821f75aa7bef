import { ErrorNote, Loading } from '../components/common.js';
import { client, localUrl } from '../lib/gateway.js';
import { useAsync } from '../lib/use-async.js';

/** The account's bots (GET /v1/bots), each with a link to its chat page (served by the gateway, same origin). */
export function BotsSection() {
  const bots = useAsync(() => client().listBots(), []);
  return (
    <section class="account-section" aria-labelledby="bots-title">
      <h2 id="bots-title">Bots</h2>
      {bots.loading && !bots.data ? <Loading what="the bots" /> : null}
      <ErrorNote error={bots.error} />
      {bots.data && bots.data.length === 0 ? <p class="empty-state">No bots. Create one with POST /v1/bots (docs/bots.md).</p> : null}
      {bots.data && bots.data.length > 0 ? (
        <ul class="bot-list">
          {bots.data.map((b) => (
            <li key={b.id} class="card" data-bot-id={b.id}>
              <h3>{b.name}</h3>
              <p class="muted">
                Model <span class="mono">{b.model}</span>
                {b.secure ? ' · secure (needs a session token from your backend)' : ''}
              </p>
              {b.secure ? null : (
                // The chat page is its own document (the bot's embed token in its URL): a new tab keeps the console as it was.
                <a href={localUrl(b.chatUrl)} target="_blank" rel="noopener noreferrer">
                  Open the chat page<span class="visually-hidden"> of {b.name}</span> (new tab)
                </a>
              )}
            </li>
          ))}
        </ul>
      ) : null}
    </section>
  );
}
