import { useEffect, useRef } from 'preact/hooks';
import type { LogLine } from './use-run.js';

/** The worker's log lines as they arrive (role=log: a screen reader reads new lines politely). */
export function RunLog({ lines, running }: { lines: LogLine[]; running: boolean }) {
  // Follow the newest line while the reader is at the bottom; leave them where they scrolled to otherwise.
  const box = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);
  useEffect(() => {
    const el = box.current;
    if (el && atBottom.current) el.scrollTop = el.scrollHeight;
  }, [lines.length]);
  return (
    <section aria-labelledby="run-log-heading">
      <h2 id="run-log-heading">Log</h2>
      {lines.length === 0 ? (
        <p class="muted">{running ? 'No log lines yet.' : 'The worker logged nothing.'}</p>
      ) : null}
      <div
        role="log"
        aria-labelledby="run-log-heading"
        class="log run-log"
        tabIndex={0}
        hidden={lines.length === 0}
        ref={box}
        onScroll={(e) => {
          const el = e.currentTarget;
          atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
        }}
      >
        <ol>
        {lines.map((l) => (
          <li key={l.id} data-event-id={l.id}>
            <time class="log-time" dateTime={l.ts}>
              {new Date(l.ts).toLocaleTimeString()}
            </time>{' '}
            <span class="log-line">{l.line}</span>
          </li>
        ))}
        </ol>
      </div>
    </section>
  );
}

/** Text an LLM run streams (`output` events), growing as the deltas arrive. */
export function StreamedText({ text, running }: { text: string; running: boolean }) {
  return (
    <section aria-labelledby="streamed-heading">
      <h2 id="streamed-heading">Streamed text</h2>
      <div class="streamed-text" data-testid="streamed-text" aria-busy={running} tabIndex={0} role="region" aria-labelledby="streamed-heading">
        {text || <span class="muted">{running ? 'Waiting for the first words…' : 'Nothing was streamed.'}</span>}
      </div>
    </section>
  );
}
