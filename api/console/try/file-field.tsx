import { useRef, useState } from 'preact/hooks';
import { client, errorMessage, localUrl } from '../lib/gateway.js';
import { formatBytes } from '../lib/format.js';
import { FieldError, FieldLabel } from './field-parts.js';
import type { FieldProps } from './schema-field.js';

/** A file one of the account's succeeded runs made, offered as the input of a file field. */
export interface PreviousFile {
  url: string;
  name: string;
  content_type: string;
  size: number | null;
  run_id: string;
  kind: string;
}

/** What the field holds, told to the user: an upload, a previous run's file, or an id or URL. */
interface Chosen {
  value: string;
  text: string;
}

const baseType = (t: string): string => t.split(';')[0].trim().toLowerCase();
export const accepts = (accept: string[], type: string | null | undefined): boolean => !!type && accept.includes(baseType(type));

/**
 * A file input field: a drop zone holding a file picker (uploaded through POST /v1/files, the
 * field then holds the file id), a list of the files previous runs made that the field takes,
 * and the id or URL itself, editable (a prefilled artifact URL shows as the chosen file).
 */
export function FileField(p: FieldProps & { id: string; accept: string[] }) {
  const [busy, setBusy] = useState<string | null>(null);
  const [uploadError, setUploadError] = useState<unknown>(null);
  const [chosen, setChosen] = useState<Chosen | null>(null);
  const [over, setOver] = useState(false);
  const picker = useRef<HTMLInputElement>(null);
  const value = typeof p.value === 'string' ? p.value : '';
  const matching = (p.previous ?? []).filter((f) => accepts(p.accept, f.content_type));

  const upload = async (file: File) => {
    setUploadError(null);
    setBusy(file.name);
    try {
      const f = await client().files.upload(file);
      setChosen({ value: f.id, text: `Uploaded ${f.filename} (${f.content_type}, ${formatBytes(f.size)}) as ${f.id}` });
      p.onChange(f.id);
      if (!accepts(p.accept, f.content_type)) setUploadError(new Error(`${f.filename} is ${f.content_type}; ${p.name} takes ${p.accept.join(', ')}.`));
    } catch (err) {
      setUploadError(err);
    } finally {
      setBusy(null);
      if (picker.current) picker.current.value = '';
    }
  };

  const describe = (): string => {
    if (!value) return 'No file chosen.';
    if (chosen?.value === value) return chosen.text;
    const prev = matching.find((f) => f.url === value);
    if (prev) return `${prev.name} of ${prev.run_id} (${prev.content_type})`;
    if (/^file_/.test(value)) return `File ${value}`;
    return `${nameOfUrl(value)} (${value})`;
  };

  const errorId = `${p.id}-error`;
  const error = p.error ?? (uploadError ? errorMessage(uploadError) : undefined);
  return (
    <fieldset class="field file-field" aria-describedby={error ? errorId : undefined}>
      <legend>
        {p.name}
        {p.required ? <span class="required"> (required)</span> : null}
      </legend>
      <div
        class={`drop-zone${over ? ' drop-over' : ''}`}
        data-drop-zone={p.name}
        onDragOver={(e) => {
          e.preventDefault();
          setOver(true);
        }}
        onDragLeave={() => setOver(false)}
        onDrop={(e) => {
          e.preventDefault();
          setOver(false);
          const file = e.dataTransfer?.files[0];
          if (file) void upload(file);
        }}
      >
        <p class="drop-text">Drop a file here ({p.accept.join(', ')}), or</p>
        <label for={`${p.id}-upload`}>Upload a file for {p.name}</label>
        <input
          ref={picker}
          type="file"
          id={`${p.id}-upload`}
          accept={p.accept.join(',')}
          disabled={!!busy}
          onChange={(e) => {
            const file = (e.currentTarget as HTMLInputElement).files?.[0];
            if (file) void upload(file);
          }}
        />
      </div>
      {matching.length ? (
        <div class="field">
          <label for={`${p.id}-previous`}>Or a file of a previous run</label>
          <select
            id={`${p.id}-previous`}
            value={matching.some((f) => f.url === value) ? value : ''}
            onChange={(e) => {
              const v = (e.currentTarget as HTMLSelectElement).value;
              if (v) p.onChange(v);
            }}
          >
            <option value="">Choose…</option>
            {matching.map((f) => (
              <option key={f.url} value={f.url}>
                {f.name} · {f.kind.replace(/^inference:/, '')} · {f.run_id}
              </option>
            ))}
          </select>
        </div>
      ) : null}
      <div class="field">
        <FieldLabel id={p.id} name={`${p.name}: file id or URL`} required={false} />
        <input type="text" id={p.id} name={p.name} class="mono" value={value} required={p.required} aria-invalid={error ? true : undefined} aria-describedby={error ? errorId : undefined} onInput={(e) => p.onChange((e.currentTarget as HTMLInputElement).value)} />
      </div>
      <p class="file-chosen" role="status" data-chosen={p.name}>
        {busy ? `Uploading ${busy}…` : describe()}
        {value && !busy && value.includes('/v1/artifacts/') ? (
          <>
            {' '}
            <a href={localUrl(value)} target="_blank" rel="noopener">
              Open
            </a>
          </>
        ) : null}
      </p>
      <FieldError id={errorId} error={error} />
    </fieldset>
  );
}

function nameOfUrl(url: string): string {
  try {
    return decodeURIComponent(new URL(url).pathname.split('/').pop() || url);
  } catch {
    return url;
  }
}
