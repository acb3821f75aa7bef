import { writeMjpegAvi } from './avi.js';
import { describeInput, readInputImage, resample } from './files.js';
import type { DemoFamily } from './job.js';
import { int, num, str } from './inputs.js';
import { encodeJpeg } from './jpeg.js';
import { mix, palette } from './palette.js';

const WIDTH = 96;
const HEIGHT = 64;
const MAX_FRAMES = 48;

/**
 * inference:video:generate: a disc gliding over a gradient, or over the input image (scaled to
 * the frame) when there is one, as Motion-JPEG in AVI: a format every player decodes and that a
 * small hand-written JPEG encoder (jpeg.ts) can feed. Defaults to 12 frames at 12 fps.
 */
export const video: DemoFamily = async ({ input, rng, ctx }) => {
  const picture = await readInputImage(ctx, input, 'image');
  const backdrop = picture ? resample(picture.image, WIDTH, HEIGHT) : null;
  const fps = int(input, 'fps', 12, 1, 30);
  const frameCount = Math.max(1, Math.min(MAX_FRAMES, Math.round(num(input, 'duration_s', 1, 0, 60) * fps)));
  const [main, accent] = palette(str(input, 'prompt') || str(input, 'image'), rng);
  const start = { x: rng.next() * WIDTH, y: rng.next() * HEIGHT };
  const end = { x: rng.next() * WIDTH, y: rng.next() * HEIGHT };
  const radius = rng.range(8, 20);
  const background = Array.from({ length: HEIGHT }, (_, y) => mix(main, [0, 0, 0], y / HEIGHT / 2)); // darkening towards the bottom
  const frames: Buffer[] = [];
  for (let f = 0; f < frameCount; f++) {
    const t = frameCount > 1 ? f / (frameCount - 1) : 0;
    const cx = start.x + (end.x - start.x) * t;
    const cy = start.y + (end.y - start.y) * t;
    const rgb = new Uint8Array(WIDTH * HEIGHT * 3);
    for (let y = 0; y < HEIGHT; y++) {
      for (let x = 0; x < WIDTH; x++) {
        const inside = (x - cx) ** 2 + (y - cy) ** 2 < radius ** 2;
        const at = (y * WIDTH + x) * 3;
        if (inside) rgb.set(accent, at);
        else rgb.set(backdrop ? backdrop.subarray(at, at + 3) : background[y], at);
      }
    }
    frames.push(encodeJpeg(rgb, WIDTH, HEIGHT));
  }
  return {
    artifacts: [{ name: 'video.avi', contentType: 'video/x-msvideo', data: writeMjpegAvi(frames, WIDTH, HEIGHT, fps) }],
    extra: { width: WIDTH, height: HEIGHT, fps, frames: frameCount, ...(picture ? { input: describeInput('image', picture.read) } : {}) },
  };
};
