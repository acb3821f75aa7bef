import { useState } from 'preact/hooks';
import { ErrorNote, Loading } from '../components/common.js';
import { DataTable } from '../components/data-table.js';
import { formatTime } from '../lib/format.js';
import { signOut } from '../lib/gateway.js';
import { getSession } from '../lib/session.js';
import { useAsync } from '../lib/use-async.js';
import { createKey, listKeys, revokeKey, type ApiKeyInfo } from './account-api.js';
import { ConfirmDialog } from '../components/confirm-dialog.js';
import { SecretPanel } from './secret-panel.js';

/** Whether `k` is the key this tab is signed in with (its id when a sign-in link minted it, else its prefix). */
function isThisTabsKey(k: ApiKeyInfo): boolean {
  const s = getSession();
  if (!s || k.revoked_at) return false;
  return s.keyId ? s.keyId === k.id : s.apiKey.startsWith(k.prefix);
}

/** API keys: list, create (the secret shown once), revoke behind a confirmation. */
export function ApiKeysSection() {
  const keys = useAsync(listKeys, []);
  const [name, setName] = useState('');
  const [created, setCreated] = useState<{ name: string | null; key: string } | null>(null);
  const [revoking, setRevoking] = useState<ApiKeyInfo | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [said, setSaid] = useState('');

  const create = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const k = await createKey(name.trim());
      setCreated({ name: k.name, key: k.key });
      setName('');
      keys.reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const revoke = async (k: ApiKeyInfo) => {
    const signsOut = isThisTabsKey(k);
    setBusy(true);
    setError(null);
    try {
      await revokeKey(k.id);
      setRevoking(null);
      if (signsOut) return void (await signOut());
      setSaid(`Key ${k.name ?? k.prefix} revoked.`);
      keys.reload();
    } catch (err) {
      setError(err);
      setRevoking(null);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="account-section" aria-labelledby="keys-title">
      <h2 id="keys-title">API keys</h2>
      <p class="hint">Programs send a key as <code>Authorization: Bearer sy_…</code>. Revoking one refuses it at once, on every gateway instance.</p>
      <form class="row key-create" onSubmit={create}>
        <div class="grow">
          <label for="new-key-name">Key name</label>
          <input id="new-key-name" name="name" maxLength={100} placeholder="e.g. laptop, CI" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </div>
        <button type="submit" class="button-primary" disabled={busy}>
          Create key
        </button>
      </form>
      {created ? (
        <SecretPanel title={`New API key${created.name ? ` “${created.name}”` : ''}`} secret={created.key} label="API key" onDismiss={() => setCreated(null)} />
      ) : null}
      <ErrorNote error={error} />
      <ErrorNote error={keys.error} title="Could not load the keys" />
      <p class="visually-hidden" role="status">
        {said}
      </p>
      {keys.loading && !keys.data ? <Loading what="the keys" /> : null}
      {keys.data && keys.data.length === 0 ? <p class="empty-state">No keys yet.</p> : null}
      {keys.data && keys.data.length > 0 ? (
        <DataTable
          class="account-table"
          caption="API keys, oldest first"
          rows={keys.data}
          rowKey={(k) => k.id}
          rowAttrs={(k) => ({ 'data-key-id': k.id })}
          columns={[
            {
              label: 'Name',
              cell: (k) => (
                <span>
                  {k.name ?? <span class="muted">unnamed</span>}
                  {isThisTabsKey(k) ? <span class="tag">this tab</span> : null}
                </span>
              ),
            },
            { label: 'Prefix', class: 'mono', cell: (k) => `${k.prefix}…` },
            { label: 'Created', cell: (k) => formatTime(k.created_at) },
            { label: 'State', cell: (k) => (k.revoked_at ? `revoked ${formatTime(k.revoked_at)}` : 'active') },
            {
              label: 'Actions',
              labelHidden: true,
              cell: (k) =>
                k.revoked_at ? null : (
                  <button type="button" class="button-small button-danger" aria-label={`Revoke ${k.name ?? k.prefix}`} onClick={() => setRevoking(k)}>
                    Revoke
                  </button>
                ),
            },
          ]}
        />
      ) : null}
      {revoking ? (
        <ConfirmDialog title="Revoke this key?" confirmLabel="Revoke key" busy={busy} onCancel={() => setRevoking(null)} onConfirm={() => void revoke(revoking)}>
          <p>
            <strong>{revoking.name ?? 'The unnamed key'}</strong> (<code>{revoking.prefix}…</code>) stops working at once for every program that
            uses it. This cannot be undone.
          </p>
          {isThisTabsKey(revoking) ? (
            <p class="note note-warn" role="alert">
              This is the key this tab is signed in with: revoking it signs you out.
            </p>
          ) : null}
        </ConfirmDialog>
      ) : null}
    </section>
  );
}
