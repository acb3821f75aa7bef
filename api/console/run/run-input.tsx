import type { JobResult, JsonObject } from '../../../sdk/client/index.js';
import { Link } from '../components/common.js';
import { client, localUrl } from '../lib/gateway.js';
import { useAsync } from '../lib/use-async.js';
import { inputSchema, type FieldSchema, type KindInfo } from '../try/kind-info.js';
import { TEXT_FIELDS, runAgainPath, shownValue } from './run-again.js';

/**
 * What the run was asked (GET /v1/jobs/{id}?include=input): what a person wrote first, as text,
 * then every other field, and a link to the kind's form filled with this input, confidentiality
 * and class. File fields show the reference the run used: an artifact URL as a link, a file id.
 */
export function RunInput({ job, input }: { job: JobResult; input: JsonObject }) {
  const caps = useAsync(() => client().capabilities(), []);
  const kind = (caps.data?.kinds as KindInfo[] | undefined)?.find((k) => k.kind === job.kind);
  const properties = kind ? inputSchema(kind, typeof input.model === 'string' ? input.model : undefined).properties : {};
  const texts = TEXT_FIELDS.filter((f) => typeof input[f] === 'string');
  const others = Object.keys(input).filter((f) => !texts.includes(f) && input[f] !== undefined);
  const again = kind ? runAgainPath(kind, input, { confidentiality: job.confidentiality, class: job.class }) : null;
  return (
    <section aria-labelledby="run-input-heading" class="card run-input">
      <h2 id="run-input-heading">Input</h2>
      {texts.map((f) => (
        <div key={f} class="run-input-text" data-input-field={f}>
          <h3>{f}</h3>
          <p>{input[f] as string}</p>
        </div>
      ))}
      {others.length ? (
        <dl class="run-input-fields">
          {others.map((f) => (
            <div key={f} class="run-input-field" data-input-field={f}>
              <dt>{f}</dt>
              <dd>
                <Value value={input[f]} field={f} schema={properties[f]} />
              </dd>
            </div>
          ))}
        </dl>
      ) : null}
      {!texts.length && !others.length ? <p class="muted">The input was empty.</p> : null}
      {again ? (
        <div class="run-again">
          <Link to={again.path} class="button">
            Run again
          </Link>
          <p class="hint">
            Opens the {job.kind} form with this input, confidentiality {job.confidentiality} and class {job.class}, to change or run as it is.
            {again.left.length ? ` The form cannot carry ${again.left.join(', ')} as ${again.left.length === 1 ? 'it was' : 'they were'} (an empty text, or a value other than text of a field the form does not have): set ${again.left.length === 1 ? 'it' : 'them'} in code.` : ''}
          </p>
        </div>
      ) : caps.data ? (
        <p class="hint">The gateway runs no kind {job.kind} now, so there is no form to run it again.</p>
      ) : null}
    </section>
  );
}

function Value({ value, field, schema }: { value: unknown; field: string; schema: FieldSchema | undefined }) {
  const v = shownValue(value, schema);
  switch (v.kind) {
    case 'file-url':
      return (
        <a href={localUrl(v.url)} aria-label={`${field}: ${v.url.split('/').pop()}`}>
          {v.url.split('/').pop()}
        </a>
      );
    case 'file-id':
      return <code>{v.id}</code>;
    case 'json':
      return <pre class="mono">{v.text}</pre>;
    default:
      return <span>{v.text}</span>;
  }
}
