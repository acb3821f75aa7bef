import { useEffect, useState } from 'preact/hooks';
import type { FileQuota, SwitchyardFile } from '../../../sdk/client/index.js';
import { ErrorNote, Loading } from '../components/common.js';
import { DataTable } from '../components/data-table.js';
import { formatBytes, formatTime } from '../lib/format.js';
import { client } from '../lib/gateway.js';
import { ConfirmDialog } from '../components/confirm-dialog.js';
import { FileDownloadButton } from './file-download-button.js';

const PAGE = 20;

/** The account's uploaded files (GET /v1/files), newest first, with the quota they fill; each one downloaded, or deleted behind a confirmation. */
export function FilesSection() {
  const [files, setFiles] = useState<SwitchyardFile[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const [quota, setQuota] = useState<FileQuota | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [deleting, setDeleting] = useState<SwitchyardFile | null>(null);
  const [said, setSaid] = useState('');
  const [downloadError, setDownloadError] = useState<{ filename: string; error: unknown } | null>(null);

  /** The first page again (after a delete: the quota moved), or the page after `cursor`. */
  const load = async (cursor?: string) => {
    setBusy(true);
    try {
      const page = await client().files.list({ limit: PAGE, cursor });
      setFiles((prev) => (cursor ? [...(prev ?? []), ...page.data] : page.data));
      setNext(page.next_cursor);
      if (page.quota) setQuota(page.quota);
      setError(null);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => void load(), []);

  const remove = async (f: SwitchyardFile) => {
    setBusy(true);
    try {
      await client().files.delete(f.id);
      setSaid(`${f.filename} deleted.`);
    } catch (err) {
      setError(err);
    } finally {
      setDeleting(null);
      setBusy(false);
    }
    await load();
  };

  return (
    <section class="account-section" aria-labelledby="files-title">
      <h2 id="files-title">Files</h2>
      <p class="hint">Files you upload for job inputs. They are deleted when they expire.</p>
      {quota ? (
        <div class="quota">
          <label for="files-quota">Storage used</label>
          <meter id="files-quota" min={0} max={quota.quota_bytes} value={quota.used_bytes} />
          <span data-quota>
            {formatBytes(quota.used_bytes)} of {formatBytes(quota.quota_bytes)}
          </span>
        </div>
      ) : null}
      <ErrorNote error={error} />
      <ErrorNote error={downloadError?.error} title={downloadError ? `Could not download ${downloadError.filename}` : undefined} />
      <p class="visually-hidden" role="status">
        {said}
      </p>
      {files === null && !error ? <Loading what="the files" /> : null}
      {files && files.length === 0 ? <p class="empty-state">No files. Upload one from a kind's form, or with POST /v1/files.</p> : null}
      {files && files.length > 0 ? (
        <DataTable
          class="account-table"
          caption="Files, newest first"
          rows={files}
          rowKey={(f) => f.id}
          rowAttrs={(f) => ({ 'data-file-id': f.id })}
          columns={[
            { label: 'Name', cell: (f) => f.filename },
            { label: 'Type', cell: (f) => f.content_type },
            { label: 'Size', attrs: (f) => ({ 'data-size': f.size }), cell: (f) => formatBytes(f.size) },
            { label: 'Uploaded', cell: (f) => formatTime(f.created_at) },
            { label: 'Expires', cell: (f) => formatTime(f.expires_at) },
            {
              label: 'Actions',
              labelHidden: true,
              cell: (f) => (
                <div class="file-actions">
                  <FileDownloadButton file={f} onStatus={setSaid} onError={(err) => setDownloadError(err ? { filename: f.filename, error: err } : null)} />
                  <button type="button" class="button-small button-danger" aria-label={`Delete ${f.filename}`} onClick={() => setDeleting(f)}>
                    Delete
                  </button>
                </div>
              ),
            },
          ]}
        />
      ) : null}
      {next ? (
        <button type="button" disabled={busy} onClick={() => void load(next)}>
          Load more files
        </button>
      ) : null}
      {deleting ? (
        <ConfirmDialog title="Delete this file?" confirmLabel="Delete file" busy={busy} onCancel={() => setDeleting(null)} onConfirm={() => void remove(deleting)}>
          <p>
            <strong>{deleting.filename}</strong> ({formatBytes(deleting.size)}) is deleted with its bytes, now. This cannot be undone.
          </p>
        </ConfirmDialog>
      ) : null}
    </section>
  );
}
