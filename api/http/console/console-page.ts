import type { ConsoleAssets } from './console-assets.js';

/**
 * The console's one HTML page, the same for every console path: the app reads the path and
 * renders the page it names. Nothing inline (the CSP allows no inline script or style), every
 * file from the gateway.
 */

/**
 * default-src 'none', then only what the console uses, all from the gateway: its script and the
 * vendored 3D viewer ('self'); its stylesheet; images, audio and video of artifacts ('self'),
 * and of files the page reads itself (blob:, data: for thumbnails it draws); the API and its
 * event streams (connect-src 'self'; blob: for the viewer reading a mesh the page holds).
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob: data:",
  "media-src 'self' blob:",
  "connect-src 'self' blob: data:",
  "worker-src 'self' blob:",
  "font-src 'self'",
  "manifest-src 'self'",
  "base-uri 'self'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const escapeAttr = (s: string) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

export interface ConsolePageOptions {
  assets: ConsoleAssets;
  /** PUBLIC_URL: its path is the page's base (a gateway behind a path prefix), its origin how artifact URLs begin. */
  publicUrl: string;
}

export function consolePageHtml({ assets, publicUrl }: ConsolePageOptions): string {
  const base = `${new URL(publicUrl).pathname.replace(/\/+$/, '')}/`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Switchyard console</title>
<base href="${escapeAttr(base)}">
<meta name="switchyard-public-url" content="${escapeAttr(publicUrl)}">
<meta name="switchyard-model-viewer" content="${assets.href('vendor/model-viewer.min.js')}">
<link rel="icon" href="${assets.href('icon.svg')}" type="image/svg+xml">
<link rel="stylesheet" href="${assets.href('app.css')}">
<script type="module" src="${assets.href('app.js')}"></script>
</head>
<body>
<div id="app"><p class="boot">Loading the console…</p></div>
<noscript><p>The Switchyard console needs JavaScript. The API works without it: see /v1/openapi.json.</p></noscript>
</body>
</html>
`;
}
