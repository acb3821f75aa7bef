import { KIND_INPUT_EXAMPLES } from '../../api/http/openapi/kind-examples.js';
import { KINDS, fileFields } from '../../models/kinds.js';
import { dataUri, sampleGlb, samplePng, sampleWav } from './sample-files.js';

/**
 * A valid input of every kind, from the document's examples, each file field holding a real
 * file of its first accepted type as a data: URI, so the gateway takes it without /v1/files.
 */
export async function kindInputs(): Promise<Record<string, Record<string, unknown>>> {
  const files: Record<string, string> = {
    'image/png': dataUri('image/png', samplePng()),
    'model/gltf-binary': dataUri('model/gltf-binary', await sampleGlb()),
    'audio/wav': dataUri('audio/wav', sampleWav()),
  };
  return Object.fromEntries(
    KINDS.map((spec) => {
      const example = KIND_INPUT_EXAMPLES[spec.kind];
      if (!example) throw new Error(`no example input of ${spec.kind} in api/http/openapi/kind-examples.ts`);
      const input = { ...example };
      for (const [field, { accept }] of Object.entries(fileFields(spec))) input[field] = files[accept[0]];
      return [spec.kind, input];
    }),
  );
}
