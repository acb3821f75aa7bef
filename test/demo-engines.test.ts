import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { crc32, deflateSync } from 'node:zlib';
import os from 'node:os';
import path from 'node:path';
import jpeg from 'jpeg-js';
import { PNG } from 'pngjs';
import { WaveFile } from 'wavefile';
import { KINDS, fileFields, KIND_NAMES } from '../models/kinds.js';
import { GltfBuilder } from '../sdk/engines/demo/glb.js';
import { createDemoEngine, DEMO_FAMILIES, type DemoEngineOptions } from '../sdk/engines/demo/index.js';
import { box } from '../sdk/engines/demo/mesh.js';
import type { Engine, EngineArtifact, EngineContext, EngineResult, InputFile } from '../sdk/engines/types.js';
import { ESPEAK_NG, POCKETSPHINX, requireProgram } from './helpers/optional-program.js';

// gltf-validator (Khronos, compiled from Dart) ships no type declarations.
interface GltfReport {
  issues: { numErrors: number; messages: Array<{ code: string; message: string; severity: number }> };
  info: { hasSkins: boolean; hasTextures: boolean; maxInfluences: number; totalTriangleCount: number };
}
const gltfValidator = createRequire(import.meta.url)('gltf-validator') as { validateBytes(data: Uint8Array): Promise<GltfReport> };

const INPUTS: Record<string, Record<string, unknown>> = {
  'inference:image:generate': { prompt: 'a red fox in the snow', model: 'sdxl' },
  'inference:3d:image-to-mesh': { image: 'https://example.com/chair.png' },
  'inference:3d:text-to-mesh': { prompt: 'a blue armchair' },
  'inference:video:generate': { prompt: 'a green ball rolling' },
  'inference:texture:generate': { mesh: 'https://example.com/rock.glb', prompt: 'brown bark' },
  'inference:rig': { mesh: 'https://example.com/robot.glb' },
  'inference:llm:text-generate': { prompt: 'Tell me about trains' },
  'inference:audio:music-generate': { prompt: 'calm piano', duration_s: 2 },
  'inference:audio:sfx-generate': { prompt: 'laser zap', duration_s: 0.5 },
  'inference:audio:text-to-speech': { text: 'Hello from the Switchyard demo engine.' },
  'inference:audio:transcribe': { audio: 'https://example.com/clips/interview.wav' },
};

/** The field whose change must change the files, per kind. */
const VARIED_FIELD: Record<string, string> = {
  'inference:3d:image-to-mesh': 'image',
  'inference:texture:generate': 'prompt',
  'inference:rig': 'mesh',
  'inference:audio:text-to-speech': 'text',
  'inference:audio:transcribe': 'audio',
};

const hasEspeak = spawnSync('espeak-ng', ['--version']).status === 0;

/** The demo engine as the tests run it: no delay, and no speech recognizer unless a test asks for one. */
const demo = (o: DemoEngineOptions = {}): Engine => createDemoEngine({ delayMs: 0, pocketsphinx: null, ...o });

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const isBadInput = (pattern: RegExp) => (err: any) => {
  assert.equal(err.code, 'bad_input', err.stack);
  assert.equal(err.retryable, false);
  assert.match(err.message, pattern);
  return true;
};

/** The input fields of each kind that hold a file (from the catalogue, as the gateway stages them). */
const FILE_FIELDS: Record<string, string[]> = Object.fromEntries(
  KINDS.map((spec) => [spec.kind, Object.keys(fileFields(spec))]),
);

interface Fixture {
  data: Buffer;
  contentType: string;
}

const TMP = mkdtempSync(path.join(os.tmpdir(), 'sy-demo-inputs-'));
after(() => rmSync(TMP, { recursive: true, force: true }));
let written = 0;

/** A context whose inputFile serves `files` from local files, as the worker SDK does (no file: `bad_input`). */
function context(files: Record<string, Fixture>, over: Partial<EngineContext> = {}): EngineContext {
  return {
    signal: new AbortController().signal,
    progress: () => {},
    log: () => {},
    output: () => {},
    inputFile: async (field): Promise<InputFile> => {
      const fixture = Object.hasOwn(files, field) ? files[field] : undefined;
      if (!fixture) throw Object.assign(new Error(`the lease has no file for input field ${JSON.stringify(field)}`), { code: 'bad_input', retryable: false });
      const file = path.join(TMP, `${written++}-${field}`);
      writeFileSync(file, fixture.data);
      return { path: file, size: fixture.data.length, contentType: fixture.contentType, sha256: sha256(fixture.data) };
    },
    ...over,
  };
}

/** An RGBA PNG (written by pngjs, with its adaptive row filters) whose pixel (x, y) is `colour(x, y)`. */
function png(width: number, height: number, colour: (x: number, y: number) => number[], options: { colorType?: 0 | 2 | 4 | 6; bitDepth?: 8 | 16 } = {}): Fixture {
  const image = new PNG({ width, height });
  const samples = new Uint16Array(width * height * 4);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) samples.set([...colour(x, y), 255].slice(0, 4), (y * width + x) * 4);
  // pngjs takes 16-bit samples as platform-endian 16-bit words
  image.data = options.bitDepth === 16 ? Buffer.from(samples.map((v) => v * 257).buffer) : Buffer.from(Uint8Array.from(samples));
  return { data: PNG.sync.write(image, { colorType: options.colorType ?? 6, bitDepth: options.bitDepth ?? 8, inputColorType: 6, filterType: -1 }), contentType: 'image/png' };
}

/** A .glb box (24 vertices, 12 triangles) of the given half-sizes, written by the demo's glTF builder. */
function glbBox(half: [number, number, number], { uvs = true, normals = true } = {}): Fixture {
  const geo = box(half);
  const gltf = new GltfBuilder();
  gltf.json.materials.push({ pbrMetallicRoughness: { baseColorFactor: [0.2, 0.4, 0.6, 1] } });
  const attributes: Record<string, number> = { POSITION: gltf.accessor(geo.positions, 5126, 'VEC3', 'vertex') };
  if (normals) attributes.NORMAL = gltf.accessor(geo.normals, 5126, 'VEC3', 'vertex');
  if (uvs) attributes.TEXCOORD_0 = gltf.accessor(geo.uvs, 5126, 'VEC2', 'vertex');
  gltf.json.meshes.push({ primitives: [{ attributes, indices: gltf.accessor(geo.indices, 5123, 'SCALAR', 'index'), material: 0 }] });
  gltf.json.nodes.push({ mesh: 0 });
  Object.assign(gltf.json, { scenes: [{ nodes: [0] }], scene: 0 });
  return { data: gltf.toGlb(), contentType: 'model/gltf-binary' };
}

/** A WAV (written by wavefile) of `seconds` of a sine, in the given layout. */
function wavTone(seconds: number, { rate = 22050, channels = 1, bits = '16', freq = 440 } = {}): Fixture {
  const frames = Math.round(seconds * rate);
  const peak = bits === '32f' ? 0.5 : bits === '8' ? 60 : 2 ** (Number(bits) - 2);
  const channel = Array.from({ length: frames }, (_, i) => peak * Math.sin((2 * Math.PI * freq * i) / rate) + (bits === '8' ? 128 : 0));
  const w = new WaveFile();
  w.fromScratch(channels, rate, bits, channels === 1 ? channel : Array.from({ length: channels }, () => channel));
  return { data: Buffer.from(w.toBuffer()), contentType: 'audio/wav' };
}

/** The file a URL of the fixed inputs stands for: its bytes follow from the URL, so another URL is other bytes. */
function fixtureFor(url: string): Fixture {
  const h = createHash('sha256').update(url).digest();
  if (/\.png/.test(url)) return png(48, 32, (x, y) => [h[0], (h[1] + x * 3) & 255, (h[2] + y * 5) & 255]);
  if (/\.glb/.test(url)) return glbBox([0.3 + h[0] / 400, 0.3 + h[1] / 400, 0.3 + h[2] / 400]);
  if (/\.wav/.test(url)) return wavTone(0.5 + h[0] / 256, { freq: 200 + h[1] });
  throw new Error(`no fixture for ${url}`);
}

/** The files of an input: one per file field it has, from its URL. */
function filesFor(kind: string, input: Record<string, unknown>): Record<string, Fixture> {
  return Object.fromEntries((FILE_FIELDS[kind] ?? []).filter((f) => typeof input[f] === 'string').map((f) => [f, fixtureFor(input[f] as string)]));
}

interface Run {
  result: EngineResult;
  progress: number[];
  deltas: string[];
}

async function run(kind: string, input: Record<string, unknown>, engine: Engine = demo(), signal = new AbortController().signal, files = filesFor(kind, input)): Promise<Run> {
  const progress: number[] = [];
  const deltas: string[] = [];
  const result = await engine(kind, input, context(files, { signal, progress: (p) => progress.push(p), output: (d) => deltas.push(d) }));
  return { result, progress, deltas };
}

function artifact(result: EngineResult, name: string): EngineArtifact {
  const a = result.artifacts.find((x) => x.name === name);
  assert.ok(a, `artifact ${name} in ${result.artifacts.map((x) => x.name).join(', ')}`);
  return a;
}

async function validGlb(data: Buffer): Promise<GltfReport> {
  const report = await gltfValidator.validateBytes(new Uint8Array(data));
  assert.equal(report.issues.numErrors, 0, JSON.stringify(report.issues.messages));
  return report;
}

/** The glTF JSON chunk of a .glb, to look at what the validator does not report. */
function glbJson(data: Buffer): Record<string, any> {
  assert.equal(data.toString('latin1', 0, 4), 'glTF');
  return JSON.parse(data.toString('utf8', 20, 20 + data.readUInt32LE(12)));
}

function wav(data: Buffer) {
  const w = new WaveFile(data);
  const fmt = w.fmt as { sampleRate: number; numChannels: number; bitsPerSample: number; audioFormat: number };
  const samples = w.getSamples(false) as unknown as Float64Array;
  return { fmt, samples, seconds: samples.length / fmt.sampleRate };
}

/** Walks the RIFF tree of an AVI: the frame rate and size from the headers, the '00dc' frames in movi, and the idx1 count. */
function parseAvi(data: Buffer) {
  assert.equal(data.toString('latin1', 0, 4), 'RIFF');
  assert.equal(data.readUInt32LE(4) + 8, data.length);
  assert.equal(data.toString('latin1', 8, 12), 'AVI ');
  const info = { totalFrames: 0, width: 0, height: 0, handler: '', frames: [] as Buffer[], indexEntries: 0 };
  const walk = (start: number, end: number) => {
    for (let pos = start; pos + 8 <= end; ) {
      const id = data.toString('latin1', pos, pos + 4);
      const size = data.readUInt32LE(pos + 4);
      const body = pos + 8;
      if (id === 'LIST') walk(body + 4, body + size);
      else if (id === 'avih') Object.assign(info, { totalFrames: data.readUInt32LE(body + 16), width: data.readUInt32LE(body + 32), height: data.readUInt32LE(body + 36) });
      else if (id === 'strh') info.handler = data.toString('latin1', body + 4, body + 8);
      else if (id === '00dc') info.frames.push(data.subarray(body, body + size));
      else if (id === 'idx1') info.indexEntries = size / 16;
      pos = body + size + (size % 2);
    }
  };
  walk(12, data.length);
  return info;
}

describe('demo engine', () => {
  it('has a family for every kind in the catalogue', () => {
    assert.deepEqual(Object.keys(DEMO_FAMILIES).sort(), [...KIND_NAMES].sort());
    assert.deepEqual(Object.keys(INPUTS).sort(), [...KIND_NAMES].sort());
  });

  it('rejects a kind it does not know', async () => {
    await assert.rejects(run('inference:nope', {}), /no kind/);
  });

  describe('image', () => {
    it('writes a 64x64 PNG by default that pngjs decodes', async () => {
      const { result } = await run('inference:image:generate', INPUTS['inference:image:generate']);
      const a = artifact(result, 'image.png');
      assert.equal(a.contentType, 'image/png');
      const png = PNG.sync.read(a.data);
      assert.equal(png.width, 64);
      assert.equal(png.height, 64);
    });

    it('honours width and height, capped at 512', async () => {
      const small = PNG.sync.read(artifact((await run('inference:image:generate', { prompt: 'x', width: 100, height: 70 })).result, 'image.png').data);
      assert.deepEqual([small.width, small.height], [100, 70]);
      const big = PNG.sync.read(artifact((await run('inference:image:generate', { prompt: 'x', width: 4096, height: 1024 })).result, 'image.png').data);
      assert.deepEqual([big.width, big.height], [512, 512]);
    });

    it('takes its main colour from a colour named in the prompt', async () => {
      const png = PNG.sync.read(artifact((await run('inference:image:generate', { prompt: 'something red' })).result, 'image.png').data);
      // the top-left corner is the pure main colour of the gradient unless a disc covers it
      const [r, g, b] = png.data.subarray(0, 3);
      assert.ok(r > g && r > b, `corner ${r},${g},${b} is reddish`);
    });
  });

  describe('3D meshes', () => {
    for (const kind of ['inference:3d:image-to-mesh', 'inference:3d:text-to-mesh']) {
      it(`${kind} writes a textured .glb that the Khronos validator accepts`, async () => {
        const { result } = await run(kind, INPUTS[kind]);
        const a = artifact(result, 'mesh.glb');
        assert.equal(a.contentType, 'model/gltf-binary');
        const report = await validGlb(a.data);
        assert.equal(report.info.hasTextures, true);
        assert.equal(report.info.totalTriangleCount, 12);
        const prim = glbJson(a.data).meshes[0].primitives[0];
        assert.deepEqual(Object.keys(prim.attributes).sort(), ['NORMAL', 'POSITION', 'TEXCOORD_0']);
        assert.equal(typeof prim.indices, 'number');
        assert.equal(typeof prim.material, 'number');
      });
    }
  });

  describe('rig', () => {
    it('writes a skinned .glb: joints and weights per vertex, a skin with inverse bind matrices, a joint chain', async () => {
      const { result } = await run('inference:rig', INPUTS['inference:rig']);
      const a = artifact(result, 'rig.glb');
      assert.equal(a.contentType, 'model/gltf-binary');
      const report = await validGlb(a.data);
      assert.equal(report.info.hasSkins, true);
      const json = glbJson(a.data);
      const prim = json.meshes[0].primitives[0];
      assert.ok('JOINTS_0' in prim.attributes && 'WEIGHTS_0' in prim.attributes);
      const skin = json.skins[0];
      assert.ok(skin.joints.length >= 3);
      assert.equal(json.accessors[skin.inverseBindMatrices].type, 'MAT4');
      assert.equal(json.accessors[skin.inverseBindMatrices].count, skin.joints.length);
      // every joint but the last has the next one as its child: a skeleton, not loose nodes
      skin.joints.slice(0, -1).forEach((j: number, i: number) => assert.deepEqual(json.nodes[j].children, [skin.joints[i + 1]]));
      assert.equal(result.extra?.joints, skin.joints.length);
    });
  });

  describe('video', () => {
    it('writes a Motion-JPEG AVI of a dozen frames whose frames jpeg-js decodes', async () => {
      const { result } = await run('inference:video:generate', INPUTS['inference:video:generate']);
      const a = artifact(result, 'video.avi');
      assert.equal(a.contentType, 'video/x-msvideo');
      const avi = parseAvi(a.data);
      assert.equal(avi.handler, 'MJPG');
      assert.equal(avi.totalFrames, 12);
      assert.equal(avi.frames.length, 12);
      assert.equal(avi.indexEntries, 12);
      for (const frame of [avi.frames[0], avi.frames[11]]) {
        const img = jpeg.decode(frame, { useTArray: true });
        assert.deepEqual([img.width, img.height], [avi.width, avi.height]);
      }
    });

    it('derives the frame count from duration_s and fps', async () => {
      const { result } = await run('inference:video:generate', { prompt: 'x', duration_s: 2, fps: 8 });
      assert.equal(parseAvi(artifact(result, 'video.avi').data).frames.length, 16);
    });

    it('decodes to the colours it drew', async () => {
      const { result } = await run('inference:video:generate', { prompt: 'a plain white wall', seed: 3 });
      const frame = jpeg.decode(parseAvi(artifact(result, 'video.avi').data).frames[0], { useTArray: true });
      // the top row is the gradient's lightest band of the named colour (white), unless the disc is there
      const light = Array.from({ length: frame.width }, (_, x) => frame.data[x * 4]).filter((r) => r > 200).length;
      assert.ok(light > frame.width / 2, `${light} of ${frame.width} top pixels are light`);
    });
  });

  describe('texture', () => {
    it('writes albedo, normal and roughness PNGs of one size that pngjs decodes, and the input mesh wearing them', async () => {
      const { result } = await run('inference:texture:generate', { ...INPUTS['inference:texture:generate'], resolution: 128 });
      assert.deepEqual(result.artifacts.map((a) => a.name), ['albedo.png', 'normal.png', 'roughness.png', 'textured.glb']);
      assert.equal(artifact(result, 'textured.glb').contentType, 'model/gltf-binary');
      for (const a of result.artifacts.filter((x) => x.name.endsWith('.png'))) {
        assert.equal(a.contentType, 'image/png');
        const png = PNG.sync.read(a.data);
        assert.deepEqual([png.width, png.height], [128, 128]);
      }
      // a flat area of a tangent-space normal map points straight out: about (128, 128, 255)
      const normal = PNG.sync.read(artifact(result, 'normal.png').data);
      const blue = Array.from({ length: normal.width * normal.height }, (_, i) => normal.data[i * 4 + 2]);
      assert.ok(Math.min(...blue) > 127, 'every normal faces outwards');
    });
  });

  describe('LLM text generation', () => {
    it('streams the reply word by word and returns the same text', async () => {
      const { result, deltas } = await run('inference:llm:text-generate', INPUTS['inference:llm:text-generate']);
      assert.ok(deltas.length > 5);
      const text = deltas.join('');
      assert.equal(result.extra?.text, text);
      assert.match(text, /trains/);
      assert.equal(result.extra?.finish_reason, 'stop');
      assert.equal(artifact(result, 'completion.txt').data.toString('utf8'), text);
    });

    it('stops at max_tokens words', async () => {
      const { result, deltas } = await run('inference:llm:text-generate', { prompt: 'hi', max_tokens: 3 });
      assert.equal(deltas.length, 3);
      assert.equal(result.extra?.finish_reason, 'length');
    });

    it('answers the last user message of a chat', async () => {
      const { result } = await run('inference:llm:text-generate', {
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: [{ type: 'text', text: 'what about boats?' }] },
        ],
      });
      assert.match(String(result.extra?.text), /boats/);
    });

    const weather = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] } } };

    it('calls an offered tool the user message mentions, with arguments matching its schema', async () => {
      const input = { tools: [weather], messages: [{ role: 'user', content: 'Please use get_weather for Paris' }] };
      const { result, deltas } = await run('inference:llm:text-generate', input);
      assert.deepEqual(deltas, []);
      assert.equal(result.extra?.finish_reason, 'tool_calls');
      const calls = result.extra?.tool_calls as Array<{ id: string; type: string; function: { name: string; arguments: string } }>;
      assert.equal(calls.length, 1);
      assert.equal(calls[0].type, 'function');
      assert.equal(calls[0].function.name, 'get_weather');
      assert.deepEqual(Object.keys(JSON.parse(calls[0].function.arguments)), ['city']);
      assert.match(calls[0].id, /^call_/);
      const again = await run('inference:llm:text-generate', input);
      assert.deepEqual(again.result.extra, result.extra);
    });

    it('calls the tool named by "use tool X" even when no tools are listed', async () => {
      const { result } = await run('inference:llm:text-generate', { prompt: 'use tool custom:01ABC to look it up' });
      const calls = result.extra?.tool_calls as Array<{ function: { name: string; arguments: string } }>;
      assert.equal(calls[0].function.name, 'custom:01ABC');
      assert.deepEqual(JSON.parse(calls[0].function.arguments), {});
    });

    it('answers in text when no offered tool is mentioned, and after a tool result', async () => {
      const plain = await run('inference:llm:text-generate', { tools: [weather], prompt: 'tell me a joke' });
      assert.equal(plain.result.extra?.tool_calls, undefined);
      const after = await run('inference:llm:text-generate', {
        tools: [weather],
        messages: [
          { role: 'user', content: 'use get_weather for Paris' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'call_1', content: 'sunny, 21 C' },
        ],
      });
      assert.equal(after.result.extra?.tool_calls, undefined);
      assert.match(String(after.result.extra?.text), /sunny, 21 C/);
    });
  });

  describe('music and sound effects', () => {
    for (const [kind, name] of [['inference:audio:music-generate', 'music.wav'], ['inference:audio:sfx-generate', 'sfx.wav']]) {
      it(`${kind} writes a 16-bit mono 22050 Hz WAV of the requested duration`, async () => {
        const input = INPUTS[kind];
        const a = artifact((await run(kind, input)).result, name);
        assert.equal(a.contentType, 'audio/wav');
        const { fmt, samples, seconds } = wav(a.data);
        assert.deepEqual([fmt.audioFormat, fmt.numChannels, fmt.bitsPerSample, fmt.sampleRate], [1, 1, 16, 22050]);
        assert.equal(seconds, input.duration_s);
        assert.ok(samples.some((s) => Math.abs(s) > 1000), 'not silent');
      });

      it(`${kind} caps long durations at a few seconds`, async () => {
        const { seconds } = wav(artifact((await run(kind, { prompt: 'long', duration_s: 60 })).result, name).data);
        assert.equal(seconds, 5);
      });
    }
  });

  describe('text to speech', () => {
    it(`speaks with ${hasEspeak ? 'espeak-ng, installed here' : 'a tone, espeak-ng not being installed here'}`, async () => {
      const { result } = await run('inference:audio:text-to-speech', INPUTS['inference:audio:text-to-speech']);
      assert.equal(result.extra?.engine, hasEspeak ? 'espeak-ng' : 'tone');
      const { fmt, seconds } = wav(artifact(result, 'speech.wav').data);
      assert.equal(fmt.bitsPerSample, 16);
      assert.ok(seconds > 0.2, `${seconds} s of speech`);
    });

    it('falls back to a tone WAV when espeak-ng cannot be run', async () => {
      const engine = createDemoEngine({ delayMs: 0, espeakNg: '/nonexistent/espeak-ng' });
      const { result } = await run('inference:audio:text-to-speech', { text: 'three short words' }, engine);
      assert.equal(result.extra?.engine, 'tone');
      const { fmt, seconds } = wav(artifact(result, 'speech.wav').data);
      assert.equal(fmt.sampleRate, 22050);
      assert.ok(seconds > 0.2);
    });

    it('passes text starting with a dash or shell characters as plain text', async () => {
      const { result } = await run('inference:audio:text-to-speech', { text: '--version; echo $(id) `id` | cat' });
      assert.equal(result.extra?.engine, hasEspeak ? 'espeak-ng' : 'tone');
      assert.ok(wav(artifact(result, 'speech.wav').data).seconds > 0.2);
    });
  });

  describe('transcription', () => {
    it('returns a text artifact and the same text in extra, naming the clip', async () => {
      const { result } = await run('inference:audio:transcribe', INPUTS['inference:audio:transcribe']);
      const a = artifact(result, 'transcript.txt');
      assert.match(a.contentType, /^text\/plain/);
      assert.equal(a.data.toString('utf8'), `${result.extra?.text}\n`);
      assert.match(String(result.extra?.text), /interview\.wav/);
    });
  });

  describe('input files', () => {
    /** Accessor `index` of a .glb the demo's builder wrote (tightly packed), as plain numbers. */
    function glbAccessor(data: Buffer, index: number): number[] {
      const json = glbJson(data);
      const acc = json.accessors[index];
      const view = json.bufferViews[acc.bufferView];
      const Type = ({ 5121: Uint8Array, 5123: Uint16Array, 5125: Uint32Array, 5126: Float32Array } as Record<number, Uint8ArrayConstructor | Uint16ArrayConstructor | Uint32ArrayConstructor | Float32ArrayConstructor>)[acc.componentType];
      const count = acc.count * ({ SCALAR: 1, VEC2: 2, VEC3: 3, VEC4: 4, MAT4: 16 } as Record<string, number>)[acc.type];
      const start = 20 + data.readUInt32LE(12) + 8 + view.byteOffset + (acc.byteOffset ?? 0);
      return Array.from(new Type(Uint8Array.prototype.slice.call(data, start, start + count * Type.BYTES_PER_ELEMENT).buffer));
    }
    /** The bytes of image `index` embedded in a .glb. */
    function glbImage(data: Buffer, index: number): Buffer {
      const json = glbJson(data);
      const view = json.bufferViews[json.images[index].bufferView];
      const start = 20 + data.readUInt32LE(12) + 8 + view.byteOffset;
      return data.subarray(start, start + view.byteLength);
    }
    const extent = (positions: number[], axis: number) => {
      const values = positions.filter((_, i) => i % 3 === axis);
      return Math.max(...values) - Math.min(...values);
    };

    describe('image to mesh', () => {
      const KIND = 'inference:3d:image-to-mesh';
      const input = { image: 'https://example.com/flag.png' };

      it("textures the box with the input image, at the image's aspect ratio, and names the image in asset.extras", async () => {
        const flag = png(64, 32, (x) => (x < 32 ? [255, 0, 0] : [0, 0, 255]));
        const { result } = await run(KIND, input, demo(), undefined, { image: flag });
        const glb = artifact(result, 'mesh.glb').data;
        await validGlb(glb);
        const json = glbJson(glb);
        assert.deepEqual(json.asset.extras, { input: { field: 'image', sha256: sha256(flag.data), size: flag.data.length, content_type: 'image/png', width: 64, height: 32, mean_rgb: [128, 0, 128] } });
        assert.deepEqual(result.extra, json.asset.extras);
        const texture = PNG.sync.read(glbImage(glb, json.textures[json.materials[0].pbrMetallicRoughness.baseColorTexture.index].source));
        assert.deepEqual([texture.width, texture.height], [32, 32]);
        assert.deepEqual([...texture.data.subarray(0, 3)], [255, 0, 0], 'the left of the texture is the red half');
        assert.deepEqual([...texture.data.subarray(31 * 4, 31 * 4 + 3)], [0, 0, 255], 'its right the blue half');
        const positions = glbAccessor(glb, json.meshes[0].primitives[0].attributes.POSITION);
        assert.ok(Math.abs(extent(positions, 0) / extent(positions, 1) - 2) < 1e-6, 'as wide as the image, twice as high');
      });

      /** A 2x1 palette PNG (pngjs writes none): a red pixel, and a blue one made transparent by tRNS. */
      function palettePng(): Fixture {
        const chunk = (type: string, body: Buffer) => {
          const typed = Buffer.concat([Buffer.from(type, 'latin1'), body]);
          const out = Buffer.alloc(12 + body.length);
          out.writeUInt32BE(body.length, 0);
          typed.copy(out, 4);
          out.writeUInt32BE(crc32(typed), 8 + body.length);
          return out;
        };
        const ihdr = Buffer.from([0, 0, 0, 2, 0, 0, 0, 1, 8, 3, 0, 0, 0]);
        const data = Buffer.concat([
          Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
          chunk('IHDR', ihdr),
          chunk('PLTE', Buffer.from([255, 0, 0, 0, 0, 255])),
          chunk('tRNS', Buffer.from([255, 0])),
          chunk('IDAT', deflateSync(Buffer.from([0, 0, 1]))),
          chunk('IEND', Buffer.alloc(0)),
        ]);
        return { data, contentType: 'image/png' };
      }

      it('counts pixels by their opacity, and reads grey, RGB, 16-bit and palette PNGs', async () => {
        const cases: Array<[Fixture, number[]]> = [
          [png(10, 10, (x) => (x < 5 ? [0, 200, 0, 255] : [255, 255, 255, 0])), [0, 200, 0]],
          [palettePng(), [255, 0, 0]],
          [png(7, 5, () => [100, 100, 100], { colorType: 0 }), [100, 100, 100]],
          [png(5, 7, () => [10, 20, 30], { colorType: 2, bitDepth: 16 }), [10, 20, 30]],
        ];
        for (const [fixture, mean] of cases) {
          const { result } = await run(KIND, input, demo(), undefined, { image: fixture });
          assert.deepEqual((result.extra?.input as Record<string, unknown>).mean_rgb, mean);
        }
      });

      it('refuses a JPEG, a truncated or damaged PNG and a file that is no image as bad_input, not retryable', async () => {
        const good = png(16, 16, (x, y) => [x * 16, y * 16, 0]).data;
        const damaged = Buffer.from(good);
        damaged[good.indexOf('IDAT') + 10] ^= 0xff;
        const cases: Array<[Buffer, RegExp]> = [
          [Buffer.from(jpeg.encode({ width: 8, height: 8, data: Buffer.alloc(8 * 8 * 4, 200) }, 90).data), /is a JPEG; the demo engine reads PNG images only/],
          [good.subarray(0, good.length - 20), /truncated PNG/],
          [damaged, /damaged PNG \(bad CRC of its IDAT chunk\)/],
          [Buffer.from('just some text'), /not a PNG/],
        ];
        for (const [data, message] of cases) await assert.rejects(run(KIND, input, demo(), undefined, { image: { data, contentType: 'image/png' } }), isBadInput(message));
      });

      it('fails as bad_input when the lease has no file for the image', async () => {
        await assert.rejects(run(KIND, input, demo(), undefined, {}), isBadInput(/no file for input field "image"/));
      });
    });

    describe('rig', () => {
      const KIND = 'inference:rig';
      const input = { mesh: 'https://example.com/robot.glb' };

      it("keeps the input mesh's positions, normals, UVs, indices and colour, and skins it to a joint chain from its bottom to its top", async () => {
        const mesh = glbBox([0.5, 1, 0.25]);
        const { result } = await run(KIND, input, demo(), undefined, { mesh });
        const glb = artifact(result, 'rig.glb').data;
        const report = await validGlb(glb);
        assert.equal(report.info.hasSkins, true);
        assert.equal(report.info.totalTriangleCount, 12);
        const [inJson, outJson] = [glbJson(mesh.data), glbJson(glb)];
        const [inPrim, outPrim] = [inJson.meshes[0].primitives[0], outJson.meshes[0].primitives[0]];
        for (const name of ['POSITION', 'NORMAL', 'TEXCOORD_0']) assert.deepEqual(glbAccessor(glb, outPrim.attributes[name]), glbAccessor(mesh.data, inPrim.attributes[name]), name);
        assert.deepEqual(glbAccessor(glb, outPrim.indices), glbAccessor(mesh.data, inPrim.indices));
        assert.deepEqual(outJson.materials[0].pbrMetallicRoughness.baseColorFactor, [0.2, 0.4, 0.6, 1]);
        const joints = glbAccessor(glb, outPrim.attributes.JOINTS_0);
        const weights = glbAccessor(glb, outPrim.attributes.WEIGHTS_0);
        for (let v = 0; v < 24; v++) {
          assert.equal(weights[v * 4] + weights[v * 4 + 1], 1, `vertex ${v}'s weights sum to 1`);
          assert.equal(joints[v * 4 + 1] - joints[v * 4], 1, `vertex ${v} is weighted to two adjacent joints`);
        }
        const skin = outJson.skins[0];
        assert.deepEqual(outJson.nodes[skin.joints[0]].translation, [0, -1, 0], 'the chain starts at the bottom middle of the mesh');
        const bones = skin.joints.slice(1).map((j: number) => outJson.nodes[j].translation[1]);
        assert.ok(Math.abs(bones.reduce((a: number, b: number) => a + b, 0) + bones[0] - 2) < 1e-6, 'and its bones span its height');
        assert.deepEqual(outJson.asset.extras, { input: { field: 'mesh', sha256: sha256(mesh.data), size: mesh.data.length, content_type: 'model/gltf-binary' } });
        assert.deepEqual(result.extra, { joints: skin.joints.length, vertices: 24, triangles: 12, input: outJson.asset.extras.input });
      });

      it('refuses a truncated .glb, a file that is no .glb and a .glb without a mesh as bad_input, not retryable', async () => {
        const mesh = glbBox([1, 1, 1]).data;
        const empty = new GltfBuilder().toGlb();
        const cases: Array<[Buffer, RegExp]> = [
          [mesh.subarray(0, mesh.length - 16), /truncated \.glb/],
          [png(4, 4, () => [0, 0, 0]).data, /not a \.glb/],
          [empty, /has no mesh/],
        ];
        for (const [data, message] of cases) await assert.rejects(run(KIND, input, demo(), undefined, { mesh: { data, contentType: 'model/gltf-binary' } }), isBadInput(message));
      });
    });

    describe('texture', () => {
      const KIND = 'inference:texture:generate';

      it('puts the maps on the input mesh: its geometry kept, the albedo as base colour, UVs made for a mesh without', async () => {
        const mesh = glbBox([2, 1, 0.5], { uvs: false });
        const { result } = await run(KIND, { mesh: 'https://example.com/rock.glb', prompt: 'brown bark', resolution: 32 }, demo(), undefined, { mesh });
        const glb = artifact(result, 'textured.glb').data;
        const report = await validGlb(glb);
        assert.equal(report.info.hasTextures, true);
        const [inJson, json] = [glbJson(mesh.data), glbJson(glb)];
        const [inPrim, prim] = [inJson.meshes[0].primitives[0], json.meshes[0].primitives[0]];
        assert.deepEqual(glbAccessor(glb, prim.attributes.POSITION), glbAccessor(mesh.data, inPrim.attributes.POSITION));
        assert.deepEqual(glbAccessor(glb, prim.indices), glbAccessor(mesh.data, inPrim.indices));
        const uvs = glbAccessor(glb, prim.attributes.TEXCOORD_0);
        assert.equal(uvs.length, 48);
        assert.ok(uvs.every((c) => c >= 0 && c <= 1) && new Set(uvs).size > 1, 'UVs spread over the texture');
        const material = json.materials[prim.material];
        const albedo = glbImage(glb, json.textures[material.pbrMetallicRoughness.baseColorTexture.index].source);
        assert.ok(albedo.equals(artifact(result, 'albedo.png').data), 'the base colour texture is the albedo map');
        assert.equal(json.asset.extras.input.sha256, sha256(mesh.data));
        assert.equal((result.extra?.input as Record<string, unknown>).sha256, sha256(mesh.data));
      });

      it('refuses a damaged mesh as bad_input', async () => {
        await assert.rejects(run(KIND, { mesh: 'https://example.com/a.glb' }, demo(), undefined, { mesh: { data: Buffer.from('glTF'), contentType: 'model/gltf-binary' } }), isBadInput(/not a \.glb/));
      });
    });

    describe('video', () => {
      it('draws its frames over the input image', async () => {
        const KIND = 'inference:video:generate';
        const green = png(20, 20, () => [0, 190, 0]);
        const { result } = await run(KIND, { image: 'https://example.com/field.png' }, demo(), undefined, { image: green });
        const frame = jpeg.decode(parseAvi(artifact(result, 'video.avi').data).frames[0], { useTArray: true });
        const greenish = Array.from({ length: frame.width * frame.height }, (_, i) => frame.data.subarray(i * 4, i * 4 + 3)).filter(([r, g, b]) => g > 150 && r < 60 && b < 60).length;
        assert.ok(greenish > (frame.width * frame.height) / 2, `${greenish} of ${frame.width * frame.height} pixels are the image's green`);
        assert.equal((result.extra?.input as Record<string, unknown>).sha256, sha256(green.data));
        const red = await run(KIND, { image: 'https://example.com/field.png' }, demo(), undefined, { image: png(20, 20, () => [190, 0, 0]) });
        assert.notDeepEqual(artifact(red.result, 'video.avi').data, artifact(result, 'video.avi').data);
      });
    });

    describe('transcription', () => {
      const KIND = 'inference:audio:transcribe';
      const input = { audio: 'https://example.com/clips/interview.wav' };

      it('reports the duration of the input WAV, whatever its layout, and says that no recognizer ran', async () => {
        const clip = wavTone(1.5, { rate: 8000, channels: 2 });
        const { result } = await run(KIND, input, demo(), undefined, { audio: clip });
        assert.equal(result.extra?.duration_s, 1.5);
        assert.equal(result.extra?.recognizer, null);
        assert.equal(result.extra?.note, 'no speech recognizer ran: speech recognition is turned off');
        assert.match(String(result.extra?.text), /^Demo transcript of interview\.wav \(1\.5 s of audio; no speech recognizer ran: speech recognition is turned off\): /);
        assert.deepEqual(result.extra?.input, { field: 'audio', sha256: sha256(clip.data), size: clip.data.length, content_type: 'audio/wav' });
        for (const bits of ['8', '24', '32', '32f']) {
          const other = await run(KIND, input, demo(), undefined, { audio: wavTone(0.25, { rate: 16000, bits }) });
          assert.equal(other.result.extra?.duration_s, 0.25, `${bits}-bit`);
        }
      });

      it('says so when the recognizer is not installed', async () => {
        const { result } = await run(KIND, input, demo({ pocketsphinx: '/nonexistent/pocketsphinx' }), undefined, { audio: wavTone(0.5) });
        assert.equal(result.extra?.note, 'no speech recognizer ran: pocketsphinx is not installed');
      });

      it('refuses audio that is not a WAV as bad_input, not retryable', async () => {
        const mp3 = Buffer.concat([Buffer.from('ID3\x04\x00\x00\x00\x00\x00\x00', 'latin1'), Buffer.alloc(100)]);
        await assert.rejects(run(KIND, input, demo(), undefined, { audio: { data: mp3, contentType: 'audio/mpeg' } }), isBadInput(/not a WAV file/));
      });
    });

    describe('transcription with pocketsphinx', function () {
      this.timeout(60_000);
      let pocketsphinx: string;
      let espeakNg: string;
      before(function () {
        pocketsphinx = requireProgram(this, POCKETSPHINX);
        espeakNg = requireProgram(this, ESPEAK_NG);
      });

      it('hears what espeak-ng says in the input WAV (resampled from 22050 Hz), and nothing in silence', async () => {
        const file = path.join(TMP, 'yes.wav');
        execFileSync(espeakNg, ['-w', file, 'yes']);
        const speech = { data: readFileSync(file), contentType: 'audio/wav' };
        const engine = demo({ pocketsphinx });
        const { result } = await run('inference:audio:transcribe', { audio: 'https://example.com/yes.wav' }, engine, undefined, { audio: speech });
        assert.equal(result.extra?.recognizer, path.basename(pocketsphinx));
        assert.match(String(result.extra?.text), /\byes\b/);
        assert.ok(Number(result.extra?.duration_s) > 0.2, String(result.extra?.duration_s));
        assert.equal(artifact(result, 'transcript.txt').data.toString('utf8'), `${result.extra?.text}\n`);
        const silence = await run('inference:audio:transcribe', { audio: 'https://example.com/quiet.wav' }, engine, undefined, { audio: wavTone(1, { freq: 0 }) });
        assert.equal(silence.result.extra?.text, '');
      });
    });

    describe('text to speech with a reference voice', () => {
      it('reports the reference clip: its sha256, and its duration when it is a WAV', async () => {
        const KIND = 'inference:audio:text-to-speech';
        const clip = wavTone(0.75);
        const input = { text: 'hello', reference_audio: 'https://example.com/voice.wav' };
        const { result } = await run(KIND, input, demo({ espeakNg: null }), undefined, { reference_audio: clip });
        assert.deepEqual(result.extra?.reference_audio, { field: 'reference_audio', sha256: sha256(clip.data), size: clip.data.length, content_type: 'audio/wav', duration_s: 0.75 });
        const mp3 = { data: Buffer.from('ID3 not really'), contentType: 'audio/mpeg' };
        const other = await run(KIND, input, demo({ espeakNg: null }), undefined, { reference_audio: mp3 });
        assert.deepEqual(other.result.extra?.reference_audio, { field: 'reference_audio', sha256: sha256(mp3.data), size: mp3.data.length, content_type: 'audio/mpeg', duration_s: null });
      });
    });
  });

  describe('every kind', () => {
    for (const kind of Object.keys(INPUTS)) {
      it(`${kind}: the same input gives byte-identical files, whatever the key order`, async () => {
        const input = INPUTS[kind];
        const reordered = Object.fromEntries(Object.entries(input).reverse());
        const [a, b] = await Promise.all([run(kind, input), run(kind, reordered)]);
        assert.ok(a.result.artifacts.length > 0);
        assert.deepEqual(b.result, a.result);
      });

      it(`${kind}: a different ${VARIED_FIELD[kind] ?? 'prompt'} gives different files`, async () => {
        const field = VARIED_FIELD[kind] ?? 'prompt';
        const other = { ...INPUTS[kind], [field]: `${INPUTS[kind][field]} but different` };
        const [a, b] = await Promise.all([run(kind, INPUTS[kind]), run(kind, other)]);
        a.result.artifacts.forEach((art, i) => assert.notDeepEqual(b.result.artifacts[i].data, art.data, art.name));
      });

      it(`${kind}: reports progress in increasing steps ending at 1`, async () => {
        const { progress } = await run(kind, INPUTS[kind], demo({ delayMs: 20 }));
        assert.ok(progress.length >= 3);
        progress.slice(1).forEach((p, i) => assert.ok(p > progress[i], `${progress}`));
        assert.equal(progress.at(-1), 1);
      });
    }
  });

  describe('abort', () => {
    const isAbort = (err: unknown) => err instanceof Error && err.name === 'AbortError';

    it('rejects with an AbortError while waiting out the delay, without reporting completion', async () => {
      // a one-minute delay: only a prompt abort lets this finish inside mocha's timeout
      const ac = new AbortController();
      const progress: number[] = [];
      const job = createDemoEngine({ delayMs: 60_000 })('inference:image:generate', { prompt: 'x' }, { signal: ac.signal, progress: (p) => progress.push(p), log: () => {}, output: () => {}, inputFile: context({}).inputFile });
      setTimeout(() => ac.abort(), 10);
      await assert.rejects(job, isAbort);
      assert.ok(!progress.includes(1));
    });

    it('stops LLM streaming mid-reply', async () => {
      const ac = new AbortController();
      const deltas: string[] = [];
      const output = (d: string) => {
        deltas.push(d);
        ac.abort(); // the first word is out: cancel the rest
      };
      const job = createDemoEngine({ delayMs: 200 })('inference:llm:text-generate', { prompt: 'a long answer please' }, { signal: ac.signal, progress: () => {}, log: () => {}, output, inputFile: context({}).inputFile });
      await assert.rejects(job, isAbort);
      assert.equal(deltas.length, 1);
    });

    it('rejects at once for a signal that is already aborted', async () => {
      const ac = new AbortController();
      ac.abort();
      await assert.rejects(run('inference:audio:text-to-speech', { text: 'hi' }, createDemoEngine({ delayMs: 0 }), ac.signal), isAbort);
    });

    if (hasEspeak) {
      it('kills espeak-ng and rejects when aborted during speech synthesis', async () => {
        const ac = new AbortController();
        // abort a few milliseconds after the last progress step, i.e. while espeak-ng is speaking
        const engine = createDemoEngine({ delayMs: 0 });
        const job = engine('inference:audio:text-to-speech', { text: 'a rather long sentence to speak. '.repeat(30) }, {
          signal: ac.signal,
          progress: (p) => p === 0.75 && setTimeout(() => ac.abort(), 5),
          log: () => {},
          output: () => {},
          inputFile: context({}).inputFile,
        });
        await assert.rejects(job, isAbort);
      });
    }
  });
});
