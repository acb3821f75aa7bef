import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { envSettings } from './config.js';

/**
 * README "Configuration"'s table of settings, rendered from the settings table
 * (api/main/config-schema.ts) so that the manual cannot drift from what the gateway reads; the
 * config test fails while README holds another text. `node --import tsx api/main/config-doc.ts`
 * rewrites it in place.
 */

export const README = path.resolve(import.meta.dirname, '..', '..', 'README.md');
const BEGIN = '<!-- settings: generated from api/main/config-schema.ts by `node --import tsx api/main/config-doc.ts` -->';
const END = '<!-- /settings -->';

export function settingsTable(): string {
  const cell = (text: string) => text.replace(/\|/g, '\\|');
  const rows = envSettings().map((s) => {
    const dflt = s.docDefault ?? (s.default === undefined ? 'unset' : `\`${s.default}\``);
    return `| \`${s.env}\` | ${cell(dflt)} | ${cell(s.doc)} |`;
  });
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n');
}

/** The table README holds between its markers, or undefined when the markers are missing. */
export function readmeSettingsTable(readme: string): string | undefined {
  const start = readme.indexOf(BEGIN);
  const end = readme.indexOf(END, start);
  return start < 0 || end < 0 ? undefined : readme.slice(start + BEGIN.length, end).trim();
}

if (process.argv[1] && path.resolve(process.argv[1]) === import.meta.filename) {
  const readme = readFileSync(README, 'utf8');
  if (readmeSettingsTable(readme) === undefined) throw new Error(`${README} has no ${BEGIN} ... ${END} block to fill`);
  const start = readme.indexOf(BEGIN) + BEGIN.length;
  // Blank lines around the table: a Markdown table next to an HTML comment may not render as one.
  writeFileSync(README, `${readme.slice(0, start)}\n\n${settingsTable()}\n\n${readme.slice(readme.indexOf(END, start))}`);
  console.log(`${path.relative(process.cwd(), README)}: settings table written (${envSettings().length} settings)`);
}
