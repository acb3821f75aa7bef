import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import { CopyButton } from '../components/common.js';

/**
 * A secret the gateway shows once (a new API key, a worker token). It lives only in the state
 * of the section that asked for it: dismissing it, or leaving the page, forgets it for good.
 * Focus moves to it so a screen reader reads the warning first.
 */
export function SecretPanel({ title, secret, label, onDismiss, children }: { title: string; secret: string; label: string; onDismiss: () => void; children?: ComponentChildren }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => ref.current?.focus(), []);
  return (
    <div class="secret-panel" ref={ref} tabIndex={-1} role="region" aria-label={title}>
      <h3>{title}</h3>
      <p class="note note-warn">
        <strong>Copy it now.</strong> This is the only time it is shown: the gateway keeps only a hash, and it is gone from this page when
        you hide it or leave.
      </p>
      <div class="secret-value">
        <code data-secret>{secret}</code>
        <CopyButton text={secret} label={`Copy the ${label}`} />
      </div>
      {children}
      <div>
        <button type="button" onClick={onDismiss}>
          I have copied it: hide it
        </button>
      </div>
    </div>
  );
}
