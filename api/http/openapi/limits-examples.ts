/** Examples of the concurrency-limit operations (api/http/routes/limits.ts), keyed by operationId. */
export function limitsExamples(accountId: string) {
  const limits = {
    account_id: accountId,
    weight: 1,
    max_running: 8,
    max_running_by_kind: { 'inference:video:generate': 2 },
    keys: [
      { id: 'key_z54pugh7cr7t2d3u', max_running: 4 },
      { id: 'key_b2xkq7m3v4zt5wpa', max_running: null },
    ],
  };
  return {
    getAccountLimits: { responses: { 200: limits } },
    setAccountLimits: { request: { max_running_by_kind: { 'inference:video:generate': 2 } }, responses: { 200: limits } },
    setApiKeyLimits: { request: { max_running: 4 }, responses: { 200: limits } },
    adminGetAccountLimits: { responses: { 200: limits } },
    adminSetAccountLimits: { request: { max_running: 8, weight: 1 }, responses: { 200: limits } },
    adminSetApiKeyLimits: { request: { max_running: 4 }, responses: { 200: limits } },
  };
}
