import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import jpeg from 'jpeg-js';
import { PNG } from 'pngjs';
import { WaveFile } from 'wavefile';
import { KIND_NAMES } from '../models/kinds.js';
import { createDemoEngine, DEMO_FAMILIES } from '../sdk/engines/demo/index.js';
import type { Engine, EngineArtifact, EngineResult } from '../sdk/engines/types.js';

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

const noFiles = (field: string) => Promise.reject(Object.assign(new Error(`no file for ${field}`), { code: 'bad_input', retryable: false }));

interface Run {
  result: EngineResult;
  progress: number[];
  deltas: string[];
}

async function run(kind: string, input: Record<string, unknown>, engine: Engine = createDemoEngine({ delayMs: 0 }), signal = new AbortController().signal): Promise<Run> {
  const progress: number[] = [];
  const deltas: string[] = [];
  const result = await engine(kind, input, { signal, progress: (p) => progress.push(p), log: () => {}, output: (d) => deltas.push(d), inputFile: noFiles });
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
    it('writes albedo, normal and roughness PNGs of one size that pngjs decodes', async () => {
      const { result } = await run('inference:texture:generate', { ...INPUTS['inference:texture:generate'], resolution: 128 });
      assert.deepEqual(result.artifacts.map((a) => a.name), ['albedo.png', 'normal.png', 'roughness.png']);
      for (const a of result.artifacts) {
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
        const { progress } = await run(kind, INPUTS[kind], createDemoEngine({ delayMs: 20 }));
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
      const job = createDemoEngine({ delayMs: 60_000 })('inference:image:generate', { prompt: 'x' }, { signal: ac.signal, progress: (p) => progress.push(p), log: () => {}, output: () => {}, inputFile: noFiles });
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
      const job = createDemoEngine({ delayMs: 200 })('inference:llm:text-generate', { prompt: 'a long answer please' }, { signal: ac.signal, progress: () => {}, log: () => {}, output, inputFile: noFiles });
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
          inputFile: noFiles,
        });
        await assert.rejects(job, isAbort);
      });
    }
  });
});
