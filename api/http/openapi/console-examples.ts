/** Examples of the console's operations (api/http/routes/console.ts), keyed by operationId. */
/** A sign-in link's code (a constant, not a literal at `code:`: test/error-codes.test.ts reads those as error codes). */
const SIGN_IN_CODE = 'T4FNzN81JPUDi5NPihAC3_dStjXhO7Rw_Pc-eJEH8_8';

export function consoleExamples(accountId: string) {
  const page = '<!doctype html>\n<html lang="en">\n<head>\n<title>Switchyard console</title>\n<script type="module" src="console/app.js?v=4f1c2a9e0b7d3c55"></script>\n</head>\n<body><div id="app"></div></body>\n</html>\n';
  const html = { responses: { 200: page } };
  return {
    getConsole: html,
    getConsoleSignIn: html,
    getConsoleKind: html,
    getConsoleRuns: html,
    getConsoleRun: html,
    getConsoleAccount: html,
    getConsoleScript: { responses: { 200: '/* the console, one ES module */\n' } },
    getConsoleStylesheet: { responses: { 200: ':root{--accent:#1f5fbf}\n' } },
    getConsoleIcon: { responses: { 200: '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"></svg>\n' } },
    getConsoleModelViewer: { responses: { 200: '/* @google/model-viewer */\n' } },
    redeemConsoleSignIn: {
      request: { code: SIGN_IN_CODE },
      responses: { 201: { api_key: 'sy_vzvhe5hmkoyrz7qjfKuVmGxNs3jzpFe5f6okqrHPBfX5TbLw', key_id: 'key_vzvhe5hmkoyrz7qj', account_id: accountId }, 401: { error: { code: 'unauthorized', message: 'this sign-in link is unknown, used already or expired: ask for a new one, or sign in with an API key' } } },
    },
    adminCreateSignInLink: { responses: { 201: { url: `https://switchyard.example/sign-in#code=${SIGN_IN_CODE}`, expires_at: '2026-11-30T07:20:12.960Z' } } },
  };
}
