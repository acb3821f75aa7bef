import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { artifactContentType } from '../models/artifact-store.js';
import { ARTIFACTS_KEYWORD, KIND_NAMES, KINDS, fileFields, type KindSpec } from '../models/kinds.js';
import { compile } from '../models/validation.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import type { EngineContext, EngineResult, InputFile } from '../sdk/engines/types.js';
import { artifactUrl } from '../sdk/protocol/index.js';
import { sampleGlb, samplePng, sampleWav } from './helpers/sample-files.js';

/**
 * Each kind's output description (models/kinds.ts) against what the reference engine makes:
 * the demo engine runs every kind, on inputs that take each of its paths, and what it returns
 * must be what the catalogue says, file names and types, fields and their shapes. The check
 * closes the published schema (no field it does not name, at any depth), requires the fields
 * the catalogue says it always reports, and asks, the other way, that every file and field it
 * names is made by some run, so neither side can drift.
 */

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const GATEWAY = 'https://gateway.example';

/** Inputs of each kind that together take every path of its demo family that changes the output. */
const TOOL = { type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } };
const VARIANTS: Record<string, Array<Record<string, unknown>>> = {
  'inference:image:generate': [{ prompt: 'a fox' }, { prompt: 'a fox', width: 96, height: 64 }],
  'inference:3d:image-to-mesh': [{ image: 'file_image' }],
  'inference:3d:text-to-mesh': [{ prompt: 'a chair' }],
  'inference:video:generate': [{ prompt: 'a ball' }, { image: 'file_image', fps: 4, duration_s: 0.5 }],
  'inference:texture:generate': [{ mesh: 'file_mesh', prompt: 'bark' }],
  'inference:rig': [{ mesh: 'file_mesh' }],
  // A reply, one cut short by max_tokens, and a tool call (no completion.txt then).
  'inference:llm:text-generate': [{ prompt: 'Tell me about trains' }, { prompt: 'Tell me about trains', max_tokens: 2 }, { prompt: 'use tool weather for Paris', tools: [TOOL] }],
  'inference:audio:music-generate': [{ prompt: 'calm piano', duration_s: 0.5 }],
  'inference:audio:sfx-generate': [{ prompt: 'laser', duration_s: 0.3 }],
  'inference:audio:text-to-speech': [{ text: 'hello there' }, { text: 'hello there', reference_audio: 'file_audio' }],
  'inference:audio:transcribe': [{ audio: 'file_audio' }, { audio: 'file_audio', language: 'de' }],
};

/** Closes every object schema that names its properties, so a field the catalogue does not name fails. */
function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed);
  if (!schema || typeof schema !== 'object') return schema;
  const out = Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, k === ARTIFACTS_KEYWORD ? v : closed(v)]));
  if (out.type === 'object' && out.properties) out.additionalProperties = false;
  return out;
}

describe('kind outputs', () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'kind-outputs-'));
  let fixtures: Record<string, { data: Buffer; contentType: string }>;
  let written = 0;
  before(async () => {
    fixtures = {
      image: { data: samplePng(16, 3), contentType: 'image/png' },
      mesh: { data: await sampleGlb(), contentType: 'model/gltf-binary' },
      audio: { data: sampleWav(), contentType: 'audio/wav' },
    };
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  /** A worker's context that serves every file field of the kind from the fixtures, as the worker SDK would from the lease. */
  function context(spec: KindSpec): EngineContext {
    const fields = fileFields(spec);
    return {
      signal: new AbortController().signal,
      progress: () => {},
      log: () => {},
      output: () => {},
      inputFile: async (field): Promise<InputFile> => {
        const accept = fields[field]?.accept ?? [];
        const fixture = Object.values(fixtures).find((f) => accept.includes(f.contentType));
        if (!fixture) throw new Error(`no fixture for ${spec.kind} ${field}`);
        const file = path.join(tmp, `${written++}-${field}`);
        writeFileSync(file, fixture.data);
        return { path: file, size: fixture.data.length, contentType: fixture.contentType, sha256: sha256(fixture.data) };
      },
    };
  }

  /** The output a gateway would store for the result: the worker SDK's `{...extra, urls}`, and the gateway's `files`. */
  function outputOf(result: EngineResult): Record<string, unknown> {
    const files = result.artifacts.map((a, i) => {
      const url = artifactUrl(GATEWAY, { id: `${'a'.repeat(31)}${'234567'[i % 6]}`, name: a.name });
      return { url, name: a.name, content_type: artifactContentType(a.contentType, a.name), size: a.data.length, sha256: sha256(a.data) };
    });
    return { ...(result.extra ?? {}), urls: files.map((f) => f.url), files };
  }

  it('has inputs for every kind of the catalogue, each valid for its kind', () => {
    assert.deepEqual(Object.keys(VARIANTS).sort(), [...KIND_NAMES].sort());
    for (const spec of KINDS) {
      for (const input of VARIANTS[spec.kind]) assert.ok(compile(spec.inputSchema)(input), `${spec.kind} ${JSON.stringify(input)}: ${JSON.stringify(compile(spec.inputSchema).errors)}`);
    }
  });

  it('describes each kind\'s files and output schema, the files listed in the schema too', () => {
    for (const spec of KINDS) {
      const { artifacts, schema } = spec.output;
      assert.ok(artifacts.length > 0, `${spec.kind} names no file`);
      assert.deepEqual(schema[ARTIFACTS_KEYWORD], artifacts, spec.kind);
      assert.equal(new Set(artifacts.map((a) => a.name)).size, artifacts.length, `${spec.kind}: a name twice`);
      for (const a of artifacts) {
        assert.deepEqual(Object.keys(a).sort(), ['always', 'content_type', 'description', 'name'], spec.kind);
        // What the gateway stores for a file of that name and type: the catalogue names the type callers get.
        assert.equal(artifactContentType(a.content_type, a.name), a.content_type, `${spec.kind} ${a.name}`);
      }
      // The gateway guarantees urls and files only: it checks no other field of a worker's output.
      assert.deepEqual(schema.required, ['urls', 'files'], spec.kind);
      const own = Object.keys(schema.properties as object);
      assert.deepEqual(spec.output.reported.filter((f) => !own.includes(f) || f === 'urls' || f === 'files'), [], `${spec.kind}: reported fields the schema does not describe`);
      for (const f of spec.output.reported) assert.ok(String(schema.description).includes(`\`${f}\``), `${spec.kind}: the description names ${f}`);
    }
  });

  it("docs/api.md's table of outputs names every kind's files, their types and its fields", () => {
    const reference = readFileSync(path.join(import.meta.dirname, '..', 'docs', 'api.md'), 'utf8');
    const start = reference.indexOf('| kind | files (content type) |');
    assert.ok(start > 0, 'the outputs table of "Kinds"');
    const rows = reference.slice(start).split('\n\n')[0].split('\n');
    for (const spec of KINDS) {
      const row = rows.find((r) => r.startsWith(`| \`${spec.kind}\` |`));
      assert.ok(row, `no row for ${spec.kind}`);
      const [, files, fields] = row.split(' | ');
      for (const a of spec.output.artifacts) {
        assert.ok(files.includes(`\`${a.name}\``), `${spec.kind}: ${a.name}`);
        assert.ok(files.includes(a.content_type), `${spec.kind}: ${a.content_type}`);
      }
      const own = Object.keys(spec.output.schema.properties as object).filter((f) => f !== 'urls' && f !== 'files');
      assert.deepEqual(own.filter((f) => !fields.includes(`\`${f}\``)), [], `${spec.kind}: fields the table does not name`);
    }
  });

  for (const spec of KINDS) {
    it(`${spec.kind}: the demo engine makes what the catalogue says`, async () => {
      const engine = createDemoEngine({ delayMs: 0, espeakNg: null, pocketsphinx: null });
      const declared = new Map(spec.output.artifacts.map((a) => [a.name, a]));
      const validate = compile({ ...(closed(spec.output.schema) as object), required: ['urls', 'files', ...spec.output.reported] });
      const madeFiles = new Set<string>();
      const madeFields = new Set<string>();
      for (const input of VARIANTS[spec.kind]) {
        const result = await engine(spec.kind, input, context(spec));
        const names = result.artifacts.map((a) => a.name);
        for (const a of result.artifacts) {
          const d = declared.get(a.name);
          assert.ok(d, `${spec.kind} made ${a.name}, which its output description does not name`);
          assert.equal(a.contentType, d.content_type, `${spec.kind} ${a.name}`);
          madeFiles.add(a.name);
        }
        for (const d of spec.output.artifacts) if (d.always) assert.ok(names.includes(d.name), `${spec.kind} ${JSON.stringify(input)} made no ${d.name}, said to be always there`);
        const output = outputOf(result);
        const errors = () => JSON.stringify(validate.errors?.map((e) => ({ at: e.instancePath, message: e.message, params: e.params })));
        assert.ok(validate(output), `${spec.kind} ${JSON.stringify(input)}: ${errors()}\n${JSON.stringify(output).slice(0, 1000)}`);
        Object.keys(output).forEach((k) => madeFields.add(k));
      }
      assert.deepEqual([...declared.keys()].filter((n) => !madeFiles.has(n)), [], `${spec.kind}: files described but never made`);
      const described = Object.keys(spec.output.schema.properties as object);
      assert.deepEqual(described.filter((f) => !madeFields.has(f)), [], `${spec.kind}: fields described but never reported`);
    });
  }
});
