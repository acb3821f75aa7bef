import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { widgetCss } from './styles.js';

/**
 * The browser scripts, built once at boot from the plain JS files beside this one: each is one
 * IIFE holding the shared chat core and its bootstrap, so nothing leaks into the host page's
 * globals but `window.SwitchyardChat`.
 */

const read = (name: string) => readFileSync(new URL(name, import.meta.url), 'utf8');

function iife(parts: string[]): string {
  const js = `(function () {\n'use strict';\n${parts.join('\n')}\n})();\n`;
  // The page inlines its script; a closing tag inside would end it early.
  if (/<\/script/i.test(js)) throw new Error('a bot-page script contains "</script"');
  return js;
}

const core = read('chat-core.js');

/** GET /embed.js: the widget, with its CSS. */
export const embedScript = iife([`var CSS = ${JSON.stringify(widgetCss)};`, core, read('embed-boot.js')]);
export const embedEtag = `"${createHash('sha256').update(embedScript).digest('hex').slice(0, 32)}"`;

/** The script inlined (with a nonce) in the chat page. */
export const pageScript = iife([core, read('page-boot.js')]);
