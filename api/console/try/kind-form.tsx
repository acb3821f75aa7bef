import { useMemo, useRef, useState } from 'preact/hooks';
import { SwitchyardApiError, type Confidentiality, type JobClass } from '../../../sdk/client/index.js';
import { ErrorNote } from '../components/common.js';
import { client, gatewayBase } from '../lib/gateway.js';
import { navigate } from '../lib/router.js';
import { useAsync } from '../lib/use-async.js';
import { FieldError } from './field-parts.js';
import { buildInput, fieldOfPath, isMainField, type RawValue, type RawValues } from './form-values.js';
import { FILE_KEYWORD, formatPrice, inputSchema, type KindInfo } from './kind-info.js';
import type { PreviousFile } from './file-field.js';
import { SchemaField, fieldId } from './schema-field.js';
import { SnippetTabs } from './snippet-tabs.js';

const CONFIDENTIALITY: Confidentiality[] = ['open', 'trusted', 'private'];
const CLASSES: JobClass[] = ['interactive', 'standard', 'batch'];

/**
 * A kind's form, made from its input schema (and its chosen model's), prefilled from the query
 * string (`?prompt=...&mesh=<url>`, and `confidentiality=` and `class=` for the job's own
 * options: a run page's "Run again"), with the same request as code beside it. Submitting sends
 * the job and opens its run page; the gateway's 400 is shown next to the fields it names.
 */
export function KindForm({ kind, query }: { kind: KindInfo; query: URLSearchParams }) {
  const [values, setValues] = useState<RawValues>(() => Object.fromEntries([...query.entries()].filter(([name]) => !jobOptionOf(kind, name))));
  const [confidentiality, setConfidentiality] = useState<Confidentiality>(() => prefilledOption(kind, query, 'confidentiality', CONFIDENTIALITY) ?? 'open');
  const [jobClass, setJobClass] = useState<JobClass>(() => prefilledOption(kind, query, 'class', CLASSES) ?? 'standard');
  const [serverErrors, setServerErrors] = useState<Record<string, string>>({});
  const [failure, setFailure] = useState<unknown>(null);
  const [showLocalErrors, setShowLocalErrors] = useState(false);
  const [sending, setSending] = useState(false);
  const formRef = useRef<HTMLFormElement>(null);

  const model = typeof values.model === 'string' && values.model ? values.model : undefined;
  const schema = inputSchema(kind, model);
  const names = Object.keys(schema.properties);
  const main = names.filter((n) => isMainField(n, schema.properties[n], schema.required));
  const advanced = names.filter((n) => !main.includes(n));
  const { input, errors: localErrors } = buildInput(schema.properties, values);
  const errors: Record<string, string> = { ...serverErrors, ...(showLocalErrors ? localErrors : {}) };
  const [advancedOpen, setAdvancedOpen] = useState(() => advanced.some((n) => values[n] !== undefined));

  const hasFileFields = names.some((n) => schema.properties[n][FILE_KEYWORD]);
  const previous = useAsync(async () => (hasFileFields ? previousFiles() : []), [hasFileFields]);

  const set = (name: string) => (v: RawValue | undefined) => {
    setValues((old) => ({ ...old, [name]: v }));
    if (serverErrors[name]) setServerErrors(({ [name]: _gone, ...rest }) => rest);
  };

  const snippetRequest = useMemo(
    () => ({ baseUrl: gatewayBase, kind: kind.kind, input, confidentiality: confidentiality === 'open' ? undefined : confidentiality, class: jobClass === 'standard' ? undefined : jobClass }),
    [JSON.stringify(input), confidentiality, jobClass, kind.kind],
  );

  const focusField = (name: string) => {
    if (advanced.includes(name)) setAdvancedOpen(true);
    setTimeout(() => formRef.current?.querySelector<HTMLElement>(`#${name.startsWith('@') ? `job-${name.slice(1)}` : fieldId(name)}`)?.focus());
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    setFailure(null);
    setServerErrors({});
    const firstBad = Object.keys(localErrors)[0];
    if (firstBad) {
      setShowLocalErrors(true);
      focusField(firstBad);
      return;
    }
    setSending(true);
    try {
      const run = await client().submit({ kind: kind.kind, input, confidentiality, class: jobClass });
      navigate(`/runs/${run.run_id}`);
    } catch (err) {
      const byField = fieldErrors(err);
      setServerErrors(byField);
      setFailure(err);
      const first = Object.keys(byField)[0];
      if (first) focusField(first);
      setSending(false);
    }
  };

  const field = (name: string) => (
    <SchemaField
      key={name}
      name={name}
      schema={schema.properties[name]}
      required={schema.required.includes(name)}
      value={values[name]}
      onChange={set(name)}
      error={errors[name]}
      models={kind.models}
      previous={previous.data}
    />
  );

  return (
    <div class="try-layout">
      <form ref={formRef} class="kind-form card stack" onSubmit={(e) => void submit(e)} aria-labelledby="form-heading">
        <h2 id="form-heading">Input</h2>
        {main.map(field)}
        {advanced.length ? (
          <details open={advancedOpen} onToggle={(e) => setAdvancedOpen((e.currentTarget as HTMLDetailsElement).open)}>
            <summary>Advanced</summary>
            <div class="stack advanced-fields">{advanced.map(field)}</div>
          </details>
        ) : null}
        <div class="grid-2 job-options">
          <JobSelect id="job-confidentiality" label="Confidentiality" options={CONFIDENTIALITY} value={confidentiality} onChange={(v) => setConfidentiality(v as Confidentiality)} error={errors['@confidentiality']} hint="Which workers may run it: open, trusted or private (attested)." />
          <JobSelect id="job-class" label="Class" options={CLASSES} value={jobClass} onChange={(v) => setJobClass(v as JobClass)} error={errors['@class']} hint="Its priority band." />
        </div>
        <ErrorNote error={failure} title="The gateway refused the job" />
        <div class="row">
          <button type="submit" class="button-primary" disabled={sending}>
            {sending ? 'Submitting…' : 'Run'}
          </button>
          <span class="muted">Costs at most {formatPrice(kind.price)}, held until the run ends.</span>
        </div>
      </form>
      <SnippetTabs request={snippetRequest} />
    </div>
  );
}

/** True when query parameter `name` is a job option (confidentiality, class), not an input field: the kind's schema does not name it. */
function jobOptionOf(kind: KindInfo, name: string): boolean {
  return (name === 'confidentiality' || name === 'class') && !(name in inputSchema(kind, undefined).properties);
}

/** A job option the query prefills, when it is one of `options`. */
function prefilledOption<T extends string>(kind: KindInfo, query: URLSearchParams, name: string, options: T[]): T | undefined {
  const v = query.get(name);
  return jobOptionOf(kind, name) && options.includes(v as T) ? (v as T) : undefined;
}

function JobSelect(p: { id: string; label: string; options: string[]; value: string; onChange: (v: string) => void; error?: string; hint: string }) {
  return (
    <div class="field">
      <label for={p.id}>{p.label}</label>
      <select id={p.id} value={p.value} onChange={(e) => p.onChange((e.currentTarget as HTMLSelectElement).value)} aria-describedby={`${p.id}-hint${p.error ? ` ${p.id}-error` : ''}`} aria-invalid={p.error ? true : undefined}>
        {p.options.map((o) => (
          <option key={o} value={o}>
            {o}
          </option>
        ))}
      </select>
      <p class="hint" id={`${p.id}-hint`}>
        {p.hint}
      </p>
      <FieldError id={`${p.id}-error`} error={p.error} />
    </div>
  );
}

/** The gateway's 400 by field: `details.errors[].path`, or `details.path` (unknown_model, url_blocked). */
function fieldErrors(err: unknown): Record<string, string> {
  if (!(err instanceof SwitchyardApiError) || !err.details) return {};
  const out: Record<string, string> = {};
  const list = Array.isArray(err.details.errors) ? (err.details.errors as Array<{ path?: string; message?: string }>) : [];
  if (typeof err.details.path === 'string') list.push({ path: err.details.path, message: err.message });
  for (const e of list) {
    const at = e.path ? fieldOfPath(e.path) : null;
    if (!at) continue;
    const text = `${at.rest ? `${at.rest.slice(1)}: ` : ''}${e.message ?? 'invalid'}`;
    out[at.field] = out[at.field] ? `${out[at.field]}; ${text}` : text;
  }
  return out;
}

/** The files of the account's recent succeeded runs, newest first. */
async function previousFiles(): Promise<PreviousFile[]> {
  const page = await client().list({ status: 'succeeded', limit: 50 });
  return page.data.flatMap((run) => (run.output?.files ?? []).filter((f) => f.content_type).map((f) => ({ url: f.url, name: f.name, content_type: f.content_type!, size: f.size, run_id: run.run_id, kind: run.kind })));
}
