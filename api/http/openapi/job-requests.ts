import { KINDS, fileFields, type KindSpec } from '../../../models/kinds.js';
import * as S from '../../contract/schemas.js';

/**
 * The published body of `POST /v1/jobs`: one schema per kind, told apart by `kind`, its `input`
 * the kind's own input schema. The server validates the looser `submitJobBody` and then the
 * input against the kind (and its model), so that a wrong kind answers `unknown_kind`; both read
 * the same schemas of models/kinds.ts, so the two cannot drift apart.
 */

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** `inference:3d:image-to-mesh` -> `inference.3d.image-to-mesh`: a component name may not hold a colon. */
export const kindSlug = (kind: string): string => kind.replaceAll(':', '.');
export const inputComponent = (kind: string): string => `input.${kindSlug(kind)}`;
export const outputComponent = (kind: string): string => `output.${kindSlug(kind)}`;
export const requestComponent = (kind: string): string => `JobRequest.${kindSlug(kind)}`;

function jobRequest(spec: KindSpec): Record<string, unknown> {
  const { kind: _kind, input: _input, confidentiality: _c, class: _class, ...rest } = S.submitJobBody.properties;
  const files = Object.keys(fileFields(spec));
  // File fields carry x-switchyard-file (models/kinds.ts) and say what they take; no `format: uri`,
  // since a bare file id (file_...) is none.
  return {
    type: 'object',
    title: spec.kind,
    description: `${spec.description}.${files.length ? ` File fields: ${files.join(', ')} (a file id, a /v1/files URL, an https URL or a data: URI).` : ''}`,
    additionalProperties: false,
    required: ['kind', 'input'],
    properties: {
      kind: { type: 'string', const: spec.kind },
      input: ref(inputComponent(spec.kind)),
      confidentiality: { ...ref('Confidentiality'), default: S.submitJobBody.properties.confidentiality.default },
      class: { ...ref('JobClass'), default: S.submitJobBody.properties.class.default },
      ...rest,
    },
    dependentRequired: S.submitJobBody.dependentRequired,
  };
}

/** The components of job submission: each kind's input and output, its request, and their union. */
export function jobRequestComponents(): Record<string, object> {
  return {
    JobRequest: {
      description: 'A job to run: `kind` chooses the schema of `input`.',
      oneOf: KINDS.map((k) => ref(requestComponent(k.kind))),
      discriminator: { propertyName: 'kind', mapping: Object.fromEntries(KINDS.map((k) => [k.kind, `#/components/schemas/${requestComponent(k.kind)}`])) },
    },
    ...Object.fromEntries(KINDS.map((k) => [requestComponent(k.kind), jobRequest(k)])),
    ...Object.fromEntries(KINDS.map((k) => [inputComponent(k.kind), k.inputSchema])),
    ...Object.fromEntries(KINDS.map((k) => [outputComponent(k.kind), k.output.schema])),
  };
}
