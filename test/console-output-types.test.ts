import assert from 'node:assert/strict';
import { chainTargets, prefillPath } from '../api/console/outputs/chain-targets.js';
import { viewerFor, type OutputFile } from '../api/console/outputs/output-file.js';
import type { Capabilities } from '../sdk/client/index.js';
import { KINDS } from '../models/kinds.js';

const file = (name: string, content_type: string | null): OutputFile => ({ url: `https://gw.example/v1/artifacts/abc/${name}`, name, content_type, size: 1, sha256: null });

/** The kinds as GET /v1/capabilities lists them (only what chaining reads). */
const caps = { kinds: KINDS.map((k) => ({ kind: k.kind, input_schema: k.inputSchema })) } as unknown as Capabilities;

/**
 * How the console's run page picks a viewer for each output file, and which kinds it offers a
 * file to ("use as input"), straight from the kinds' input schemas.
 */
describe('console output types', () => {
  it('shows each content type with the viewer browsers can use', () => {
    const cases: Array<[string, string | null, string]> = [
      ['image.png', 'image/png', 'image'],
      ['photo.jpg', 'image/jpeg', 'image'],
      ['mesh.glb', 'model/gltf-binary', 'mesh'],
      ['mesh.glb', null, 'mesh'],
      ['speech.wav', 'audio/wav', 'audio'],
      ['track.flac', 'audio/flac', 'audio'],
      ['video.mp4', 'video/mp4', 'video'],
      ['video.webm', 'video/webm', 'video'],
      // The demo engine's Motion-JPEG AVI: no browser plays it, so a note and the download.
      ['video.avi', 'video/x-msvideo', 'video-other'],
      ['completion.txt', 'text/plain; charset=utf-8', 'text'],
      ['data.json', 'application/json', 'text'],
      ['blob.bin', 'application/octet-stream', 'none'],
    ];
    for (const [name, type, viewer] of cases) assert.equal(viewerFor(file(name, type)), viewer, `${name} (${type})`);
  });

  it('offers a file to the kinds whose file fields accept its type, one click only when that field is all the kind needs', () => {
    const targets = (name: string, type: string) => chainTargets(caps, file(name, type)).map((t) => `${t.kind} ${t.field} ${t.direct ? 'submit' : 'form'}`);
    assert.deepEqual(targets('image.png', 'image/png'), ['inference:3d:image-to-mesh image submit', 'inference:video:generate image form']);
    assert.deepEqual(targets('mesh.glb', 'model/gltf-binary'), ['inference:texture:generate mesh submit', 'inference:rig mesh submit']);
    assert.deepEqual(targets('speech.wav', 'audio/wav'), ['inference:audio:text-to-speech reference_audio form', 'inference:audio:transcribe audio submit']);
    assert.deepEqual(targets('completion.txt', 'text/plain; charset=utf-8'), []);
  });

  it("opens a kind's form with the field filled in through the try page's query", () => {
    const url = 'https://gw.example/v1/artifacts/abc/image.png?x=1&y=2';
    const path = prefillPath('inference:video:generate', 'image', url);
    const parsed = new URL(path, 'https://console.example');
    assert.equal(parsed.pathname, '/kinds/inference:video:generate');
    assert.equal(parsed.searchParams.get('image'), url);
  });
});
