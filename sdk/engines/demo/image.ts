import type { DemoFamily } from './job.js';
import { int, str } from './inputs.js';
import { mix, palette } from './palette.js';
import { encodePng } from './png.js';

/** Kept small: the demo proves the pipeline, not the pixels. */
const MAX_SIDE = 512;

/** A diagonal gradient between two prompt-derived colours with a few soft discs on top. */
export const image: DemoFamily = async ({ input, rng }) => {
  const width = int(input, 'width', 64, 1, MAX_SIDE);
  const height = int(input, 'height', 64, 1, MAX_SIDE);
  const [main, accent] = palette(str(input, 'prompt'), rng);
  const discs = Array.from({ length: 3 + rng.int(4) }, () => ({
    x: rng.next() * width,
    y: rng.next() * height,
    r: rng.range(0.08, 0.3) * Math.min(width, height),
    colour: mix(accent, [255, 255, 255], rng.range(0, 0.6)),
  }));
  const pixels = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      let c = mix(main, accent, (x / width + y / height) / 2);
      for (const d of discs) {
        const dist = Math.hypot(x - d.x, y - d.y) / d.r;
        if (dist < 1) c = mix(c, d.colour, (1 - dist) * 0.8);
      }
      pixels.set(c, (y * width + x) * 3);
    }
  }
  return { artifacts: [{ name: 'image.png', contentType: 'image/png', data: encodePng(width, height, 3, pixels) }], extra: { width, height } };
};
