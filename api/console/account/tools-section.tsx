import { ErrorNote, Loading } from '../components/common.js';
import { DataTable } from '../components/data-table.js';
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
        <DataTable
          class="account-table"
          caption="Tools, oldest first"
          rows={tools.data}
          rowKey={(t) => t.id}
          rowAttrs={(t) => ({ 'data-tool-id': t.id })}
          columns={[
            { label: 'Name', cell: (t) => t.name },
            { label: 'Kind', cell: (t) => t.kind },
            { label: 'Endpoint', class: 'mono break', cell: (t) => `${t.method} ${t.url}` },
            { label: 'Id for bots', class: 'mono', cell: (t) => t.tool_id },
          ]}
        />
      ) : null}
    </section>
  );
}
