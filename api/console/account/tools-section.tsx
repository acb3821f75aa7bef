import { ErrorNote, Loading } from '../components/common.js';
import '../styles/stacked-table.css';
import { client } from '../lib/gateway.js';
import { useAsync } from '../lib/use-async.js';

/** The account's custom tools (GET /v1/tools/definitions): the HTTPS endpoints its bots may call. */
export function ToolsSection() {
  const tools = useAsync(() => client().listTools(), []);
  return (
    <section class="account-section" aria-labelledby="tools-title">
      <h2 id="tools-title">Tools</h2>
      {tools.loading && !tools.data ? <Loading what="the tools" /> : null}
      <ErrorNote error={tools.error} />
      {tools.data && tools.data.length === 0 ? <p class="empty-state">No tools. Register one with POST /v1/tools/definitions (docs/tools.md).</p> : null}
      {tools.data && tools.data.length > 0 ? (
        <div class="table-scroll">
          <table class="account-table stacked-table">
            <caption class="visually-hidden">Tools, oldest first</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Endpoint</th>
                <th scope="col">Id for bots</th>
              </tr>
            </thead>
            <tbody>
              {tools.data.map((t) => (
                <tr key={t.id} data-tool-id={t.id}>
                  <th scope="row" data-label="Name">{t.name}</th>
                  <td data-label="Kind">{t.kind}</td>
                  <td class="mono break" data-label="Endpoint">
                    {t.method} {t.url}
                  </td>
                  <td class="mono" data-label="Id for bots">{t.tool_id}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </section>
  );
}
