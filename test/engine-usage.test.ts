import assert from 'node:assert/strict';
import { encodeWav } from '../sdk/engines/demo/wav.js';
import { usageOf, wavSeconds, withUsage } from '../sdk/engines/usage.js';

/**
 * What the built-in engines report as a run's usage (docs/worker-protocol.md, "Usage"), read
 * from their results: the figures a per-unit price charges for.
 */
describe('engine usage', () => {
  it('reads tokens from an LLM output, in OpenAI names or the protocol own', () => {
    assert.deepEqual(usageOf('inference:llm:text-generate', { artifacts: [], extra: { text: 'hi', usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 } } }), { input_tokens: 12, output_tokens: 3 });
    assert.deepEqual(usageOf('inference:llm:text-generate', { artifacts: [], extra: { usage: { input_tokens: 2, output_tokens: 1 } } }), { input_tokens: 2, output_tokens: 1 });
  });

  it('reads seconds from duration_s, frames over fps, or the WAV files made', () => {
    assert.deepEqual(usageOf('inference:audio:music-generate', { artifacts: [], extra: { duration_s: 4.5 } }), { seconds: 4.5 });
    assert.deepEqual(usageOf('inference:video:generate', { artifacts: [], extra: { frames: 36, fps: 12 } }), { seconds: 3 });
    const wav = encodeWav(new Int16Array(48_000), 16_000);
    assert.equal(wavSeconds(wav), 3);
    assert.deepEqual(usageOf('inference:audio:text-to-speech', { artifacts: [{ name: 'speech.wav', contentType: 'audio/wav', data: wav }] }), { seconds: 3 });
    assert.equal(wavSeconds(Buffer.from('not a wav file at all')), undefined);
  });

  it('counts the images of an image job, and reports nothing it cannot tell', () => {
    const png = { name: 'image.png', contentType: 'image/png', data: Buffer.from('x') };
    assert.deepEqual(usageOf('inference:image:generate', { artifacts: [png, png] }), { images: 2 });
    assert.equal(usageOf('inference:rig', { artifacts: [{ name: 'rig.glb', contentType: 'model/gltf-binary', data: Buffer.from('x') }] }), undefined);
  });

  it("keeps an engine's own usage", () => {
    const own = { artifacts: [], extra: { duration_s: 9 }, usage: { seconds: 2 } };
    assert.equal(withUsage('inference:audio:sfx-generate', own), own);
  });
});
