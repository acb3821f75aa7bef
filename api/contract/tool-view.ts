import type { StoredTool } from '../../models/stores.js';

/** A tool as the API shows it: `tool_id` to name it by, `auth` without its token, no account. */
export function toolView(tool: Omit<StoredTool, 'secrets'>) {
  return {
    id: tool.id,
    tool_id: `custom:${tool.id}`,
    name: tool.name,
    description: tool.description,
    kind: tool.kind,
    method: tool.method,
    url: tool.url,
    inputSchema: tool.inputSchema,
    auth: tool.auth ? { type: tool.auth.type } : null,
    created_at: tool.created_at,
  };
}
