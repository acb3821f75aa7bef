/**
 * A valid input of each kind: the document's request examples of `POST /v1/jobs`, and the inputs
 * the tests submit and type-check (with real files in the file fields). A file field holds a
 * file id of /v1/files here; none names a `model`, whose catalogue differs per deployment.
 */
export const EXAMPLE_FILE_ID = 'file_01JD2Z8Y3N5V4QK7R6T1W0XABC';

export const KIND_INPUT_EXAMPLES: Record<string, Record<string, unknown>> = {
  'inference:image:generate': { prompt: 'a lighthouse at dusk, oil painting', width: 1024, height: 768, seed: 42 },
  'inference:3d:image-to-mesh': { image: EXAMPLE_FILE_ID, seed: 7 },
  'inference:3d:text-to-mesh': { prompt: 'a low-poly wooden chair' },
  'inference:video:generate': { prompt: 'waves rolling onto a beach', duration_s: 4, fps: 24 },
  'inference:texture:generate': { mesh: EXAMPLE_FILE_ID, prompt: 'weathered bronze', resolution: 1024 },
  'inference:rig': { mesh: EXAMPLE_FILE_ID, skeleton: 'humanoid' },
  'inference:llm:text-generate': { messages: [{ role: 'user', content: 'Name three moons of Jupiter.' }], max_tokens: 200, temperature: 0.7 },
  'inference:audio:music-generate': { prompt: 'calm piano, 70 bpm', duration_s: 30 },
  'inference:audio:sfx-generate': { prompt: 'a door creaking open', duration_s: 2 },
  'inference:audio:text-to-speech': { text: 'Your order has shipped.', voice: 'en-us' },
  'inference:audio:transcribe': { audio: EXAMPLE_FILE_ID, language: 'en' },
};
