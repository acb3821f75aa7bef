import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { errorMessage } from '../lib/gateway.js';
import { href, isPlainClick, navigate } from '../lib/router.js';

/** A link to a console path that navigates in place (a modified click opens a tab as usual). */
export function Link({ to, children, class: cls, ...rest }: { to: string; children: ComponentChildren; class?: string; 'aria-current'?: 'page' | undefined }) {
  return (
    <a
      href={href(to)}
      class={cls}
      {...rest}
      onClick={(e) => {
        if (!isPlainClick(e)) return;
        e.preventDefault();
        navigate(to);
      }}
    >
      {children}
    </a>
  );
}

/** An error, announced to screen readers as it appears. */
export function ErrorNote({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  return (
    <div class="note note-error" role="alert">
      {title ? <strong>{title}: </strong> : null}
      {errorMessage(error)}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="loading" role="status">
      Loading {what}…
    </p>
  );
}

/**
 * A button that copies `text`, and says so. `of` names what is copied when several such buttons
 * share a page ("Copy SHA-256" of each file): screen readers hear "Copy SHA-256 of image.png".
 */
export function CopyButton({ text, label = 'Copy', of }: { text: string; label?: string; of?: string }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      class="button-small"
      onClick={async () => {
        await navigator.clipboard?.writeText(text).catch(() => undefined);
        setDone(true);
        setTimeout(() => setDone(false), 1500);
      }}
    >
      {done ? 'Copied' : label}
      {of ? <span class="visually-hidden"> of {of}</span> : null}
      <span class="visually-hidden" aria-live="polite">
        {done ? ' copied to the clipboard' : ''}
      </span>
    </button>
  );
}

/** A page's heading, focused on navigation so a screen reader starts reading the new page. */
export function PageTitle({ children }: { children: ComponentChildren }) {
  return (
    <h1 tabIndex={-1} class="page-title" data-page-title>
      {children}
    </h1>
  );
}

/** Status badge of a run. */
export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge badge-${status}`}>{status.replace(/_/g, ' ')}</span>;
}
