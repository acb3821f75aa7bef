/**
 * The catalogue of capabilities (docs/api.md "Kinds"). Each kind has a rollout state and the
 * JSON Schema its `input` must satisfy. Input schemas name what a worker needs and leave
 * other fields open: `input` is forwarded verbatim, so engines may take extra parameters.
 */
export type Rollout = 'live' | 'rolling_out';

export interface KindSpec {
  kind: string;
  rollout: Rollout;
  description: string;
  /** Price in credits when no PRICES override is configured. */
  defaultPrice: number;
  inputSchema: Record<string, unknown>;
}

const prompt = { type: 'string', minLength: 1, maxLength: 10_000 };
const model = { type: 'string', minLength: 1, maxLength: 200 };
/** The schema keyword that marks an input field as a file, with the content types it takes. */
export const FILE_KEYWORD = 'x-switchyard-file';

export interface FileFieldSpec {
  /** Content types the field takes (after the gateway reads them from the bytes). */
  accept: string[];
}

/**
 * A file of the input (docs/files.md): a file id or URL of `/v1/files`, an artifact URL of one of
 * the account's runs, an https URL the gateway fetches, or a data: URI. The gateway stages it
 * before the job is queued; the worker fetches it through its lease, never from the caller's URL.
 */
const file = (accept: string[], what: string) => ({
  type: 'string',
  minLength: 1,
  description: `${what}: a file id (file_...) or URL from /v1/files, an artifact URL of one of your runs, an https URL, or a data: URI (${accept.join(', ')})`,
  [FILE_KEYWORD]: { accept } satisfies FileFieldSpec,
});
const IMAGE = ['image/png', 'image/jpeg', 'image/webp'];
const MESH = ['model/gltf-binary'];
const AUDIO = ['audio/wav', 'audio/mpeg', 'audio/ogg', 'audio/flac'];
const image = file(IMAGE, 'an image');
const mesh = file(MESH, 'a mesh (glTF binary)');
const audio = file(AUDIO, 'an audio file');
const seed = { type: 'integer', minimum: 0, maximum: 4294967295 };
const durationS = (max: number) => ({ type: 'number', exclusiveMinimum: 0, maximum: max });

function schema(properties: Record<string, unknown>, required: string[], extra: Record<string, unknown> = {}) {
  return { type: 'object', properties, required, additionalProperties: true, ...extra };
}

export const KINDS: readonly KindSpec[] = [
  {
    kind: 'inference:image:generate',
    rollout: 'live',
    description: 'text-to-image / 2D art',
    defaultPrice: 4,
    inputSchema: schema(
      { prompt, model, width: { type: 'integer', minimum: 64, maximum: 4096 }, height: { type: 'integer', minimum: 64, maximum: 4096 }, seed },
      ['prompt'],
    ),
  },
  {
    kind: 'inference:3d:image-to-mesh',
    rollout: 'live',
    description: 'single image to textured 3D mesh',
    defaultPrice: 20,
    inputSchema: schema({ image, model, seed }, ['image']),
  },
  {
    kind: 'inference:3d:text-to-mesh',
    rollout: 'live',
    description: 'prompt to 3D mesh',
    defaultPrice: 20,
    inputSchema: schema({ prompt, model, seed }, ['prompt']),
  },
  {
    kind: 'inference:video:generate',
    rollout: 'live',
    description: 'scene or image to controlled, consistent video',
    defaultPrice: 40,
    inputSchema: schema({ prompt, image, model, duration_s: durationS(60), fps: { type: 'integer', minimum: 1, maximum: 60 }, seed }, [], {
      anyOf: [{ required: ['prompt'] }, { required: ['image'] }],
    }),
  },
  {
    kind: 'inference:texture:generate',
    rollout: 'live',
    description: 'PBR textures for an existing mesh or object',
    defaultPrice: 10,
    inputSchema: schema({ mesh, prompt, model, resolution: { type: 'integer', minimum: 64, maximum: 8192 } }, ['mesh']),
  },
  {
    kind: 'inference:rig',
    rollout: 'live',
    description: 'skeleton and skin weights for a mesh',
    defaultPrice: 10,
    inputSchema: schema({ mesh, model, skeleton: { type: 'string', maxLength: 100 } }, ['mesh']),
  },
  {
    kind: 'inference:llm:text-generate',
    rollout: 'rolling_out',
    description: 'prompt in, generated text out (open LLMs)',
    defaultPrice: 1,
    inputSchema: schema(
      {
        prompt,
        model,
        messages: {
          type: 'array',
          minItems: 1,
          maxItems: 1000,
          items: { type: 'object', required: ['role'], properties: { role: { type: 'string' } } },
        },
        max_tokens: { type: 'integer', minimum: 1, maximum: 1_000_000 },
        temperature: { type: 'number', minimum: 0, maximum: 2 },
        tools: { type: 'array', maxItems: 128 },
      },
      [],
      { anyOf: [{ required: ['prompt'] }, { required: ['messages'] }] },
    ),
  },
  {
    kind: 'inference:audio:music-generate',
    rollout: 'rolling_out',
    description: 'text prompt to music track',
    defaultPrice: 8,
    inputSchema: schema({ prompt, model, duration_s: durationS(600), seed }, ['prompt']),
  },
  {
    kind: 'inference:audio:sfx-generate',
    rollout: 'rolling_out',
    description: 'text prompt to sound effect',
    defaultPrice: 4,
    inputSchema: schema({ prompt, model, duration_s: durationS(60), seed }, ['prompt']),
  },
  {
    kind: 'inference:audio:text-to-speech',
    rollout: 'rolling_out',
    description: 'synthesized speech, optionally voice-cloned from a reference clip',
    defaultPrice: 2,
    inputSchema: schema(
      { text: { type: 'string', minLength: 1, maxLength: 100_000 }, voice: { type: 'string', maxLength: 200 }, reference_audio: audio, model },
      ['text'],
    ),
  },
  {
    kind: 'inference:audio:transcribe',
    rollout: 'rolling_out',
    description: 'audio to text',
    defaultPrice: 2,
    inputSchema: schema({ audio, language: { type: 'string', maxLength: 35 }, model }, ['audio']),
  },
];

export const KIND_NAMES: readonly string[] = KINDS.map((k) => k.kind);

const byName = new Map(KINDS.map((k) => [k.kind, k]));

export function findKind(kind: string): KindSpec | undefined {
  return byName.get(kind);
}

/** The file fields of a kind's input, by name. */
export function fileFields(spec: KindSpec): Record<string, FileFieldSpec> {
  const props = (spec.inputSchema.properties ?? {}) as Record<string, Record<string, unknown>>;
  const out: Record<string, FileFieldSpec> = {};
  for (const [name, prop] of Object.entries(props)) if (prop[FILE_KEYWORD]) out[name] = prop[FILE_KEYWORD] as FileFieldSpec;
  return out;
}

/** Confidentiality tiers, weakest first: a job of tier T runs on a worker of tier T or stronger. */
export const TIERS = ['open', 'trusted', 'private'] as const;
export type Tier = (typeof TIERS)[number];

export const JOB_CLASSES = ['interactive', 'standard', 'batch'] as const;
export type JobClass = (typeof JOB_CLASSES)[number];
