import type { RouteSpec } from '../route-spec.js';
import * as T from '../../contract/tool-schemas.js';
import type { CreateToolInput, ToolService } from '../../services/tools/tool-service.js';
import { toolView } from '../../contract/tool-view.js';

const idParam = 'The `id` of the tool, or its `tool_id` (`custom:<id>`).';

export interface ToolRoutesOptions {
  tools: ToolService;
}

/** Custom tools of the account (docs/tools.md). */
export function toolRoutes({ tools }: ToolRoutesOptions): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/v1/tools/definitions',
      operationId: 'createTool',
      summary: 'Register a custom tool (agents and bots call it as `custom:<id>`)',
      tag: 'tools',
      auth: 'account',
      body: T.createToolBody,
      responses: {
        201: { description: 'The tool; a webhook tool also carries `signing_secret`, shown only now', schema: T.createdTool, headers: { Location: 'The tool' } },
        400: { description: 'invalid_request, invalid_schema (inputSchema does not compile or is not an object schema), invalid_url, url_blocked' },
        409: { description: 'name_conflict (the account has a tool of that name), conflict (the account has 100 tools)' },
      },
      async handler(ctx) {
        const { tool, signing_secret } = await tools.create(ctx.state.principal!.accountId, ctx.state.body as CreateToolInput);
        ctx.status = 201;
        ctx.set('Location', `/v1/tools/definitions/${tool.id}`);
        ctx.body = signing_secret ? { ...toolView(tool), signing_secret } : toolView(tool);
      },
    },
    {
      method: 'get',
      path: '/v1/tools/definitions',
      operationId: 'listTools',
      summary: "The account's tools (never their secrets)",
      tag: 'tools',
      auth: 'account',
      responses: { 200: { description: 'Tools, oldest first', schema: T.toolList } },
      async handler(ctx) {
        ctx.body = { data: (await tools.list(ctx.state.principal!.accountId)).map(toolView) };
      },
    },
    {
      method: 'get',
      path: '/v1/tools/definitions/{id}',
      operationId: 'getTool',
      summary: `A tool of the account. ${idParam}`,
      tag: 'tools',
      auth: 'account',
      responses: { 200: { description: 'The tool', schema: T.tool }, 404: { description: 'No such tool for this account' } },
      async handler(ctx) {
        ctx.body = toolView(await tools.get(ctx.state.principal!.accountId, ctx.params.id));
      },
    },
    {
      method: 'delete',
      path: '/v1/tools/definitions/{id}',
      operationId: 'deleteTool',
      summary: `Delete a tool; its name is free again and bots naming it no longer resolve it. ${idParam}`,
      tag: 'tools',
      auth: 'account',
      responses: { 200: { description: 'The deleted tool', schema: T.tool }, 404: { description: 'No such tool for this account' } },
      async handler(ctx) {
        ctx.body = toolView(await tools.delete(ctx.state.principal!.accountId, ctx.params.id));
      },
    },
  ];
}
