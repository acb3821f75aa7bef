import { pageCss } from './styles.js';
import { pageScript } from './assets.js';

/** Text made safe for HTML text and double- or single-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

// Only well-formed origins reach the CSP header: a space or ';' in a stored origin would
// otherwise add sources or whole directives to it.
const ORIGIN = /^(?:\*|https?:\/\/(?:\*\.)?[A-Za-z0-9.-]+(?::\d{1,5})?|https?:\/\/\[[0-9A-Fa-f:.]+\](?::\d{1,5})?)$/;

/**
 * The chat page's Content-Security-Policy: nothing but its own nonce'd style and script, a
 * socket to the gateway, and framing only by the gateway itself and the bot's allowed origins.
 */
export function chatPageCsp(opts: { nonce: string; wsOrigin: string; frameAncestors: string[] }): string {
  const ancestors = ["'self'", ...opts.frameAncestors.filter((o) => ORIGIN.test(o))];
  return [
    "default-src 'none'",
    `script-src 'nonce-${opts.nonce}'`,
    `style-src 'nonce-${opts.nonce}'`,
    `connect-src ${opts.wsOrigin}`,
    "base-uri 'none'",
    "form-action 'none'",
    `frame-ancestors ${ancestors.join(' ')}`,
  ].join('; ');
}

/** The chat page: the bot's name, its socket URL, and the inlined chat script and CSS. */
export function chatPageHtml(opts: { nonce: string; botName: string; wsUrl: string }): string {
  const name = escapeHtml(opts.botName);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${name}</title>
<style nonce="${opts.nonce}">${pageCss}</style>
</head>
<body>
<main id="sy-chat" data-name="${name}" data-ws="${escapeHtml(opts.wsUrl)}"></main>
<noscript>This chat needs JavaScript.</noscript>
<script nonce="${opts.nonce}">${pageScript}</script>
</body>
</html>
`;
}
