import { openAiErrorType } from './openai/openai-error.js';
import type { RouteSpec } from './route-spec.js';
import { componentNames, componentSchemas, withRefs } from './openapi/components.js';
import { ERROR_EXAMPLES, OPERATION_EXAMPLES } from './openapi/examples.js';

const ERROR_RESPONSES: Record<number, string> = {
  400: 'Invalid request (error envelope)',
  401: 'Missing, malformed, unknown or revoked credential',
  413: 'Body too large',
  415: 'Body is not application/json',
  429: 'Rate limited; see Retry-After',
};

/**
 * The rate-limit header fields of account-key answers (docs/api.md "Rate limit header fields"),
 * declared once under components.headers and referred to by every such answer.
 */
const RATE_LIMIT_HEADERS: Record<string, { description: string; schema: object }> = {
  'RateLimit-Limit': { description: 'The burst (RATE_LIMIT_BURST): the most requests the key may make at once, the `q` of RateLimit-Policy. Absent, as all four, when rate limiting is off.', schema: { type: 'integer', minimum: 1 } },
  'RateLimit-Remaining': { description: 'Requests the key may still make at once, after this one (0 on a 429).', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Policy': {
    description:
      'The key\'s token bucket, in the syntax of draft-ietf-httpapi-ratelimit-headers: `"key";q=<burst>;w=<seconds an emptied bucket takes to fill>;switchyard-rate=<RATE_LIMIT_PER_SEC>`, e.g. `"key";q=100;w=2;switchyard-rate=50`.',
    schema: { type: 'string' },
  },
  RateLimit: {
    description: 'The key\'s service limit, in the same draft\'s syntax: `"key";r=<RateLimit-Remaining>;t=<whole seconds until one request more>`; on a 429, `t` is Retry-After.',
    schema: { type: 'string' },
  },
};
const rateLimitRefs = Object.fromEntries(Object.keys(RATE_LIMIT_HEADERS).map((h) => [h, { $ref: `#/components/headers/${h}` }]));
const RETRY_AFTER = { 'Retry-After': { description: 'Whole seconds to wait before trying again', schema: { type: 'integer', minimum: 1 } } };

/** Builds the OpenAPI 3.1 document from the route specs that the router mounts. */
export function buildOpenApi(routes: RouteSpec[], serverUrl: string, version: string): Record<string, unknown> {
  const components = componentSchemas();
  const named = componentNames(components);
  const ref = (schema: unknown) => withRefs(schema, named);
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const responses: Record<string, unknown> = {};
    const examples = OPERATION_EXAMPLES[r.operationId] ?? {};
    const openAi = r.errorStyle === 'openai';
    /** An answer's example: the operation's own, or for an error the usual one of its status, in the route's error style. */
    const example = (n: number) => {
      const value = examples.responses?.[n] ?? (n >= 400 ? ERROR_EXAMPLES[n] : undefined);
      if (value === undefined) return {};
      if (n < 400 || !openAi) return { example: value };
      const { code, message } = (value as (typeof ERROR_EXAMPLES)[number]).error;
      return { example: { error: { message, type: openAiErrorType(n), param: null, code } } };
    };
    const errorSchema = { $ref: `#/components/schemas/${openAi ? 'OpenAIError' : 'Error'}` };
    const errorContent = (n: number) => ({ 'application/json': { schema: errorSchema, ...example(n) } });
    for (const [status, res] of Object.entries(r.responses)) {
      const n = Number(status);
      responses[status] = {
        description: res.description,
        ...(res.headers ? { headers: Object.fromEntries(Object.entries(res.headers).map(([h, d]) => [h, { description: d, schema: { type: 'string' } }])) } : {}),
        ...(res.mediaType === 'none'
          ? {}
          : { content: n >= 400 ? errorContent(n) : { [res.mediaType ?? 'application/json']: { schema: ref(res.schema ?? {}), ...example(n) } } }),
      };
    }
    const generic = [...(r.body ? [400, 413, 415] : [400]), ...(r.auth === 'none' ? [] : [401]), ...(r.auth === 'account' ? [429] : [])];
    for (const status of generic) responses[String(status)] ??= { description: ERROR_RESPONSES[status], content: errorContent(status) };
    if (r.auth === 'account') {
      // Every answer of a request the key's gate admitted carries the rate-limit fields, and its 429 too.
      for (const [status, res] of Object.entries(responses) as Array<[string, { headers?: object }]>) {
        const n = Number(status);
        if (n < 400 || n === 429) res.headers = { ...res.headers, ...(n === 429 ? RETRY_AFTER : {}), ...rateLimitRefs };
      }
    }
    const requestExamples = examples.requests ? { examples: examples.requests } : examples.request !== undefined ? { example: examples.request } : {};
    const parameters: unknown[] = [];
    for (const m of r.path.matchAll(/\{([a-z_]+)\}/g)) parameters.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
    const query = r.query as { properties?: Record<string, object> } | undefined;
    for (const [name, schema] of Object.entries(query?.properties ?? {})) parameters.push({ name, in: 'query', required: false, schema: ref(schema) });
    for (const h of r.headers ?? []) parameters.push({ name: h.name, in: 'header', required: false, description: h.description, schema: h.schema });

    paths[r.path] ??= {};
    paths[r.path][r.method] = {
      operationId: r.operationId,
      summary: r.summary,
      tags: [r.tag],
      security: r.security ?? (r.auth === 'account' ? [{ bearer: [] }, { serviceKey: [] }] : r.auth === 'admin' ? [{ admin: [] }] : []),
      ...(parameters.length ? { parameters } : {}),
      ...(r.body ? { requestBody: { required: true, content: { 'application/json': { schema: ref(r.publishedBody ?? r.body), ...requestExamples } } } } : {}),
      ...(r.raw ? { requestBody: { required: true, content: { '*/*': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } } } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'Switchyard',
      version,
      description: 'Job gateway: submit media-generation and inference jobs by kind, follow them, fetch artifact URLs.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [{ url: serverUrl }],
    paths,
    components: {
      // Each kind's input schema has its file fields marked with x-switchyard-file (docs/files.md);
      // each kind's output schema lists its files under x-switchyard-artifacts.
      schemas: Object.fromEntries(Object.entries(components).map(([name, schema]) => [name, withRefs(schema, named, schema)])),
      headers: RATE_LIMIT_HEADERS,
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'Account API key' },
        serviceKey: { type: 'apiKey', in: 'header', name: 'X-Service-Key', description: 'Account API key' },
        admin: { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN' },
        uploadToken: { type: 'http', scheme: 'bearer', description: "A lease's upload_token (worker artifact uploads)" },
      },
    },
  };
}
