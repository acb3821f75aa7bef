import type { KindOutputArtifact } from '../sdk/client/types.js';

/**
 * The catalogue of capabilities (docs/api.md "Kinds"). Each kind has a rollout state, the
 * JSON Schema its `input` must satisfy and the description of its `output`. Input schemas name
 * what a worker needs and leave other fields open: `input` is forwarded verbatim, so engines
 * may take extra parameters.
 */
export type Rollout = 'live' | 'rolling_out';

export interface KindSpec {
  kind: string;
  rollout: Rollout;
  description: string;
  /** Price in credits when no PRICES override is configured. */
  defaultPrice: number;
  inputSchema: Record<string, unknown>;
  output: KindOutputSpec;
}

/**
 * What a succeeded run of a kind gives its caller: the files it produces, named and typed as
 * the reference (demo) engine makes them, and the JSON Schema of `output`. The schema is open
 * (`additionalProperties`), since other engines may report more; test/kind-outputs.test.ts runs
 * the demo engine for every kind against it, closed and with `reported` required, so the two
 * cannot drift apart.
 */
export interface KindOutputSpec {
  artifacts: KindOutputArtifact[];
  /**
   * JSON Schema (2020-12) of `output`; lists `artifacts` under ARTIFACTS_KEYWORD, so the OpenAPI
   * document shows them. It requires only `urls` and `files`, the fields the gateway guarantees.
   */
  schema: Record<string, unknown>;
  /** The kind's own fields the reference engine reports in every run (the schema's description names them). */
  reported: string[];
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

/**
 * "At least one of these fields". Each branch names its field, inside an allOf, so that client
 * generators (openapi-typescript) type it as `fields & ({a} | {b})`; a bare
 * `anyOf: [{required: [a]}, ...]` beside `properties` becomes `unknown` there.
 */
const atLeastOneOf = (...fields: string[]) => ({
  allOf: [{ anyOf: fields.map((f) => ({ type: 'object', required: [f], properties: { [f]: {} } })) }],
});

function schema(properties: Record<string, unknown>, required: string[], extra: Record<string, unknown> = {}) {
  return { type: 'object', properties, required, additionalProperties: true, ...extra };
}

/** The schema keyword that lists, in a kind's output schema, the files its runs produce. */
export const ARTIFACTS_KEYWORD = 'x-switchyard-artifacts';

const nullable = (s: object) => ({ anyOf: [s, { type: 'null' }] });
const count = { type: 'integer', minimum: 0 };
const sha256 = { type: 'string', pattern: '^[0-9a-f]{64}$' };

/**
 * An entry of `output.files`, written by the gateway at settlement from its own record of each
 * artifact (dispatch/output-files.ts); null fields for a URL that is not one of its artifacts.
 */
export const OUTPUT_FILE_SCHEMA = {
  type: 'object',
  required: ['url', 'name', 'content_type', 'size', 'sha256'],
  additionalProperties: false,
  properties: {
    url: { type: 'string', description: 'The URL of `urls` this entry describes.' },
    name: { type: 'string', description: "The artifact's file name, or the last path segment of another URL." },
    content_type: nullable({ type: 'string', description: 'As the gateway stored and serves it.' }),
    size: nullable({ ...count, description: 'Bytes.' }),
    sha256: nullable({ ...sha256, description: 'Hex sha256 of the bytes, hashed by the gateway at the upload (the ETag of the download).' }),
  },
} as const;

/** `urls` and `files`, the fields of every kind's output. */
export const OUTPUT_COMMON_PROPERTIES = {
  urls: { type: 'array', items: { type: 'string', format: 'uri' }, description: 'Artifact URLs, as the worker reported them: a plain GET fetches each.' },
  files: { type: 'array', items: OUTPUT_FILE_SCHEMA, description: 'One entry per URL of `urls`, in the same order, written by the gateway: a worker cannot set it.' },
} as const;

/** What an output says about the input file it was made from (the demo's `describeInput`). */
const inputInfo = (field: string, more: Record<string, unknown> = {}) => ({
  type: 'object',
  description: `The input file (${field}) the output was made from, as the worker received it.`,
  required: ['field', 'sha256', 'size', 'content_type', ...Object.keys(more)],
  properties: { field: { const: field }, sha256, size: count, content_type: { type: 'string' }, ...more },
});

const artifact = (name: string, content_type: string, description: string, always = true): KindOutputArtifact => ({ name, content_type, description, always });

/**
 * A kind's output: its files, and its own fields besides `urls` and `files` (`reported`: the ones
 * the reference engine always reports). Only `urls` and `files` are required: the gateway takes a
 * `complete` frame only with `urls` (dispatch/worker-frames.ts) and writes `files` itself, but
 * checks no other field of it, so a caller can count on no other.
 */
function output(artifacts: KindOutputArtifact[], properties: Record<string, unknown> = {}, reported: string[] = []): KindOutputSpec {
  const own = Object.keys(properties).length
    ? ` The gateway checks none of the kind's other fields: they are described as the reference (demo) engine reports them (${
        reported.length ? `always ${reported.map((f) => `\`${f}\``).join(', ')}` : 'each only in some runs'
      }), and an engine may leave any out or report others.`
    : ' Engines may report other fields, which the gateway does not check.';
  return {
    artifacts,
    reported,
    schema: {
      type: 'object',
      description: `A succeeded run's \`output\`. \`urls\` and \`files\` are always there: the gateway takes a worker's completion only with \`urls\`, and writes \`files\` itself.${own}`,
      required: ['urls', 'files'],
      properties: { ...OUTPUT_COMMON_PROPERTIES, ...properties },
      additionalProperties: true,
      [ARTIFACTS_KEYWORD]: artifacts,
    },
  };
}

const PNG = 'image/png';
const GLB = 'model/gltf-binary';
const WAV = 'audio/wav';
const TEXT = 'text/plain; charset=utf-8';
const positive = { type: 'integer', minimum: 1 };
const seconds = { type: 'number', minimum: 0 };
const meshOutput = (extra: Record<string, unknown>, reported: string[]) =>
  output([artifact('mesh.glb', GLB, 'the textured mesh (glTF binary)')], extra, reported);
const audioOutput = (name: string, what: string) =>
  output([artifact(name, WAV, what)], { duration_s: { ...seconds, description: 'Length of the audio in seconds.' } }, ['duration_s']);

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
    output: output([artifact('image.png', PNG, 'the generated image')], { width: positive, height: positive }, ['width', 'height']),
  },
  {
    kind: 'inference:3d:image-to-mesh',
    rollout: 'live',
    description: 'single image to textured 3D mesh',
    defaultPrice: 20,
    inputSchema: schema({ image, model, seed }, ['image']),
    output: meshOutput(
      {
        input: inputInfo('image', {
          width: positive,
          height: positive,
          mean_rgb: { type: 'array', items: { type: 'integer', minimum: 0, maximum: 255 }, minItems: 3, maxItems: 3, description: 'The mean colour of the image.' },
        }),
      },
      ['input'],
    ),
  },
  {
    kind: 'inference:3d:text-to-mesh',
    rollout: 'live',
    description: 'prompt to 3D mesh',
    defaultPrice: 20,
    inputSchema: schema({ prompt, model, seed }, ['prompt']),
    output: meshOutput({}, []),
  },
  {
    kind: 'inference:video:generate',
    rollout: 'live',
    description: 'scene or image to controlled, consistent video',
    defaultPrice: 40,
    inputSchema: schema({ prompt, image, model, duration_s: durationS(60), fps: { type: 'integer', minimum: 1, maximum: 60 }, seed }, [], atLeastOneOf('prompt', 'image')),
    output: output(
      [artifact('video.avi', 'video/x-msvideo', 'the video (Motion-JPEG in AVI)')],
      { width: positive, height: positive, fps: positive, frames: positive, input: inputInfo('image') },
      ['width', 'height', 'fps', 'frames'],
    ),
  },
  {
    kind: 'inference:texture:generate',
    rollout: 'live',
    description: 'PBR textures for an existing mesh or object',
    defaultPrice: 10,
    inputSchema: schema({ mesh, prompt, model, resolution: { type: 'integer', minimum: 64, maximum: 8192 } }, ['mesh']),
    output: output(
      [
        artifact('albedo.png', PNG, 'base colour map'),
        artifact('normal.png', PNG, 'tangent-space normal map'),
        artifact('roughness.png', PNG, 'roughness map (grey)'),
        artifact('textured.glb', GLB, 'the input mesh wearing the maps (glTF binary)'),
      ],
      { resolution: { ...positive, description: 'Side of the square maps in positive.' }, input: inputInfo('mesh') },
      ['resolution', 'input'],
    ),
  },
  {
    kind: 'inference:rig',
    rollout: 'live',
    description: 'skeleton and skin weights for a mesh',
    defaultPrice: 10,
    inputSchema: schema({ mesh, model, skeleton: { type: 'string', maxLength: 100 } }, ['mesh']),
    output: output(
      [artifact('rig.glb', GLB, 'the input mesh skinned to a chain of joints (glTF binary)')],
      { joints: positive, vertices: count, triangles: count, input: inputInfo('mesh') },
      ['joints', 'vertices', 'triangles', 'input'],
    ),
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
          // Open, as JSON Schema reads it anyway: said outright so generated clients take `content` and the rest.
          items: { type: 'object', required: ['role'], properties: { role: { type: 'string' } }, additionalProperties: true },
        },
        max_tokens: { type: 'integer', minimum: 1, maximum: 1_000_000 },
        temperature: { type: 'number', minimum: 0, maximum: 2 },
        tools: { type: 'array', maxItems: 128 },
      },
      [],
      atLeastOneOf('prompt', 'messages'),
    ),
    output: output(
      [artifact('completion.txt', TEXT, 'the reply, as in `text`; none when the reply is a tool call', false)],
      {
        text: { type: 'string', description: 'The reply (empty for a tool call); its deltas were streamed as `output` events.' },
        finish_reason: { enum: ['stop', 'length', 'tool_calls'] },
        tool_calls: {
          type: 'array',
          items: {
            type: 'object',
            required: ['id', 'type', 'function'],
            properties: {
              id: { type: 'string' },
              type: { const: 'function' },
              function: { type: 'object', required: ['name', 'arguments'], properties: { name: { type: 'string' }, arguments: { type: 'string', description: 'JSON text.' } } },
            },
          },
        },
        usage: {
          type: 'object',
          required: ['prompt_tokens', 'completion_tokens', 'total_tokens'],
          properties: { prompt_tokens: count, completion_tokens: count, total_tokens: count },
        },
        model: { type: 'string', description: 'The model that answered.' },
      },
      ['text', 'finish_reason', 'usage', 'model'],
    ),
  },
  {
    kind: 'inference:audio:music-generate',
    rollout: 'rolling_out',
    description: 'text prompt to music track',
    defaultPrice: 8,
    inputSchema: schema({ prompt, model, duration_s: durationS(600), seed }, ['prompt']),
    output: audioOutput('music.wav', 'the music track'),
  },
  {
    kind: 'inference:audio:sfx-generate',
    rollout: 'rolling_out',
    description: 'text prompt to sound effect',
    defaultPrice: 4,
    inputSchema: schema({ prompt, model, duration_s: durationS(60), seed }, ['prompt']),
    output: audioOutput('sfx.wav', 'the sound effect'),
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
    output: output(
      [artifact('speech.wav', WAV, 'the spoken text')],
      {
        engine: { type: 'string', description: 'What spoke (the demo engine: espeak-ng, or a tone when it is not installed).' },
        reference_audio: inputInfo('reference_audio', { duration_s: nullable({ ...seconds, description: 'Null when the clip is not a WAV the engine reads.' }) }),
      },
      ['engine'],
    ),
  },
  {
    kind: 'inference:audio:transcribe',
    rollout: 'rolling_out',
    description: 'audio to text',
    defaultPrice: 2,
    inputSchema: schema({ audio, language: { type: 'string', maxLength: 35 }, model }, ['audio']),
    output: output(
      [artifact('transcript.txt', TEXT, 'the transcript, as in `text`')],
      {
        text: { type: 'string' },
        language: { type: 'string' },
        duration_s: seconds,
        recognizer: nullable({ type: 'string', description: 'The speech recognizer that ran; null when none did.' }),
        note: { type: 'string', description: 'Why no recognizer ran.' },
        input: inputInfo('audio'),
      },
      ['text', 'language', 'duration_s', 'recognizer', 'input'],
    ),
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
