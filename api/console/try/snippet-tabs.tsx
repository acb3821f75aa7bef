import { useRef, useState } from 'preact/hooks';
import { CopyButton } from '../components/common.js';
import { SNIPPET_LANGUAGES, snippet, type SnippetLanguage, type SnippetRequest } from './code-snippets.js';

/**
 * The form's request as code, one tab per language (the WAI-ARIA tabs pattern: arrow keys move
 * between tabs, Tab goes into the panel), each with a copy button.
 */
export function SnippetTabs({ request }: { request: SnippetRequest }) {
  const [lang, setLang] = useState<SnippetLanguage>('curl');
  const tabs = useRef<Record<string, HTMLButtonElement | null>>({});
  const code = snippet(lang, request);
  const label = SNIPPET_LANGUAGES.find((l) => l.id === lang)!.label;

  const onKey = (e: KeyboardEvent) => {
    const i = SNIPPET_LANGUAGES.findIndex((l) => l.id === lang);
    const n = SNIPPET_LANGUAGES.length;
    const to = e.key === 'ArrowRight' ? (i + 1) % n : e.key === 'ArrowLeft' ? (i - 1 + n) % n : e.key === 'Home' ? 0 : e.key === 'End' ? n - 1 : -1;
    if (to < 0) return;
    e.preventDefault();
    const next = SNIPPET_LANGUAGES[to].id;
    setLang(next);
    tabs.current[next]?.focus();
  };

  return (
    <section class="snippets card" aria-labelledby="snippets-heading">
      <h2 id="snippets-heading">The same request as code</h2>
      <p class="hint">Reads the key from <code>SWITCHYARD_API_KEY</code>; updated as you fill the form.</p>
      <div role="tablist" aria-label="Language" class="snippet-tabs" onKeyDown={onKey}>
        {SNIPPET_LANGUAGES.map((l) => (
          <button
            key={l.id}
            type="button"
            role="tab"
            id={`snippet-tab-${l.id}`}
            aria-selected={l.id === lang}
            aria-controls="snippet-panel"
            tabIndex={l.id === lang ? 0 : -1}
            ref={(el) => {
              tabs.current[l.id] = el;
            }}
            onClick={() => setLang(l.id)}
          >
            {l.label}
          </button>
        ))}
      </div>
      <div role="tabpanel" id="snippet-panel" aria-labelledby={`snippet-tab-${lang}`} class="snippet-panel">
        <div class="row snippet-actions">
          <CopyButton text={code} label={`Copy ${label}`} />
        </div>
        <pre tabIndex={0} aria-label={`${label} snippet`}>
          <code data-snippet={lang}>{code}</code>
        </pre>
      </div>
    </section>
  );
}
