import type { ComponentChildren } from 'preact';
import { FieldError, FieldLabel } from './field-parts.js';
import type { KindModel, FieldSchema } from './kind-info.js';
import { controlOf, type RawValue } from './form-values.js';
import { FileField, type PreviousFile } from './file-field.js';

export interface FieldProps {
  name: string;
  schema: FieldSchema;
  required: boolean;
  value: RawValue | undefined;
  onChange: (v: RawValue | undefined) => void;
  /** What is wrong with it: the form's own check, or the gateway's 400. */
  error?: string;
  /** The kind's models, for the `model` field. */
  models?: KindModel[];
  /** Files of previous runs, for file fields. */
  previous?: PreviousFile[];
}

export const fieldId = (name: string): string => `field-${name.replace(/[^A-Za-z0-9_-]/g, '_')}`;

/** One input field, made from its JSON Schema: the control fits its type, bounds and enum. */
export function SchemaField(p: FieldProps) {
  const id = fieldId(p.name);
  const control = p.name === 'model' && p.models?.length ? 'model' : controlOf(p.name, p.schema);
  if (control === 'file') return <FileField {...p} id={id} accept={p.schema['x-switchyard-file']!.accept} />;
  const hint = p.name === 'model' ? `A model of the kind's catalogue; empty asks for the kind's default. ${hintText(p.schema)}`.trim() : hintText(p.schema);
  const hintId = `${id}-hint`;
  const errorId = `${id}-error`;
  const describedBy = [p.error ? errorId : '', hint ? hintId : ''].filter(Boolean).join(' ') || undefined;
  const common = { id, name: p.name, 'aria-invalid': p.error ? true : undefined, 'aria-describedby': describedBy };
  const str = typeof p.value === 'string' ? p.value : '';
  const set = (e: Event) => p.onChange((e.currentTarget as HTMLInputElement).value);

  let input: ComponentChildren;
  if (control === 'checkbox') {
    input = <input type="checkbox" {...common} checked={p.value === true || p.value === 'true'} onChange={(e) => p.onChange((e.currentTarget as HTMLInputElement).checked)} />;
  } else if (control === 'model') {
    const ids = p.models!.map((m) => m.id);
    input = (
      <select {...common} value={str} onChange={set} required={p.required}>
        <option value="">The kind's default</option>
        {p.models!.map((m) => (
          <option key={m.id} value={m.id}>
            {m.id} ({m.workers ? `${m.workers} worker${m.workers === 1 ? '' : 's'}` : 'waiting for workers'})
          </option>
        ))}
        {str && !ids.includes(str) ? <option value={str}>{str}</option> : null}
      </select>
    );
  } else if (control === 'select') {
    input = (
      <select {...common} value={str} onChange={set} required={p.required}>
        {p.required ? null : <option value="">Not set</option>}
        {p.schema.enum!.map((v) => (
          <option key={String(v)} value={String(v)}>
            {String(v)}
          </option>
        ))}
      </select>
    );
  } else if (control === 'number') {
    const integer = p.schema.type === 'integer';
    input = (
      <input
        type="number"
        inputMode={integer ? 'numeric' : 'decimal'}
        {...common}
        value={str}
        onInput={set}
        required={p.required}
        min={p.schema.minimum ?? p.schema.exclusiveMinimum}
        max={p.schema.maximum ?? p.schema.exclusiveMaximum}
        step={integer ? 1 : 'any'}
      />
    );
  } else if (control === 'json' || control === 'textarea') {
    input = (
      <textarea
        {...common}
        class={control === 'json' ? 'mono' : undefined}
        value={str}
        onInput={set}
        required={p.required}
        maxLength={p.schema.maxLength}
        rows={control === 'json' ? 4 : 3}
        spellcheck={control !== 'json'}
      />
    );
  } else {
    input = <input type="text" {...common} value={str} onInput={set} required={p.required} maxLength={p.schema.maxLength} />;
  }

  return (
    <div class={`field field-${control}`}>
      {control === 'checkbox' ? (
        <div class="row checkbox-row">
          {input}
          <FieldLabel id={id} name={p.name} required={p.required} />
        </div>
      ) : (
        <>
          <FieldLabel id={id} name={p.name} required={p.required} />
          {input}
        </>
      )}
      {hint ? (
        <p class="hint" id={hintId}>
          {hint}
        </p>
      ) : null}
      <FieldError id={errorId} error={p.error} />
    </div>
  );
}

/** The field's description and bounds, in words. */
function hintText(s: FieldSchema): string {
  const parts: string[] = [];
  if (s.description) parts.push(s.description);
  const t = Array.isArray(s.type) ? s.type[0] : s.type;
  if (t === 'integer' || t === 'number') {
    const lo = s.minimum !== undefined ? `${s.minimum}` : s.exclusiveMinimum !== undefined ? `more than ${s.exclusiveMinimum}` : undefined;
    const hi = s.maximum !== undefined ? `${s.maximum}` : s.exclusiveMaximum !== undefined ? `less than ${s.exclusiveMaximum}` : undefined;
    if (lo !== undefined && hi !== undefined) parts.push(`${t === 'integer' ? 'A whole number' : 'A number'} from ${lo} to ${hi}.`);
    else if (lo !== undefined) parts.push(`At least ${lo}.`);
    else if (hi !== undefined) parts.push(`At most ${hi}.`);
  }
  if (t === 'array' || t === 'object') parts.push(`JSON (${t === 'array' ? 'an array' : 'an object'}).`);
  return parts.join(' ');
}
