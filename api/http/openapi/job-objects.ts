import { KINDS, type KindSpec } from '../../../models/kinds.js';
import * as S from '../../contract/schemas.js';
import { jobInputField } from '../../contract/job-input-schemas.js';
import { kindSlug, outputComponent } from './job-requests.js';

/**
 * The published job object: one schema per kind, told apart by `kind` as the job requests are,
 * its `output` the kind's output schema, so a generated client types a job's output by its kind.
 * The gateway answers every kind with the one object of `S.job`, whose `output` names only
 * `urls` and `files`, the fields it guarantees. The kinds' output schemas require only those
 * two as well: the other fields they type are optional, and their descriptions say the gateway
 * checks none of them (models/kinds.ts).
 */

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

export const jobComponent = (kind: string): string => `Job.${kindSlug(kind)}`;

function jobOfKind(spec: KindSpec): Record<string, unknown> {
  return {
    ...S.job,
    title: spec.kind,
    description: `A job of kind ${spec.kind} (${spec.description}).`,
    properties: {
      ...S.job.properties,
      // Published here, not in S.job: only getJob's `?include=input` adds it.
      ...jobInputField,
      kind: { type: 'string', const: spec.kind },
      output: {
        anyOf: [ref(outputComponent(spec.kind)), { type: 'null' }],
        description: "Set when the run succeeded: `urls` and `files` always, and the kind's other fields as its worker reported them.",
      },
    },
  };
}

/** `Job`, the union every answer that holds a job refers to, and its schema per kind. */
export function jobComponents(): Record<string, object> {
  return {
    Job: {
      description: 'A job: `kind` chooses the schema of `output`.',
      oneOf: KINDS.map((k) => ref(jobComponent(k.kind))),
      discriminator: { propertyName: 'kind', mapping: Object.fromEntries(KINDS.map((k) => [k.kind, `#/components/schemas/${jobComponent(k.kind)}`])) },
    },
    ...Object.fromEntries(KINDS.map((k) => [jobComponent(k.kind), jobOfKind(k)])),
  };
}
