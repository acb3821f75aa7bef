import type { DemoFamily } from './job.js';
import { int, str } from './inputs.js';
import { mix, palette } from './palette.js';
import { encodePng } from './png.js';

const MAX_SIDE = 256;

/**
 * inference:texture:generate: a PBR set (albedo, tangent-space normal, roughness) from one seeded
 * height field of round bumps, so the three maps agree with each other the way real ones do.
 */
export const texture: DemoFamily = async ({ input, rng }) => {
  const size = int(input, 'resolution', 64, 1, MAX_SIDE);
  const [main, accent] = palette(str(input, 'prompt') || str(input, 'mesh'), rng);
  const bumps = Array.from({ length: 4 + rng.int(8) }, () => ({ x: rng.next() * size, y: rng.next() * size, r: rng.range(0.05, 0.25) * size }));
  const height = new Float32Array(size * size);
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      let h = 0;
      for (const b of bumps) h = Math.max(h, 1 - Math.hypot(x - b.x, y - b.y) / b.r);
      height[y * size + x] = h;
    }
  }
  const at = (x: number, y: number) => height[Math.min(size - 1, Math.max(0, y)) * size + Math.min(size - 1, Math.max(0, x))];
  const albedo = new Uint8Array(size * size * 3);
  const normal = new Uint8Array(size * size * 3);
  const roughness = new Uint8Array(size * size);
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const i = y * size + x;
      const h = height[i];
      albedo.set(mix(main, accent, h), i * 3);
      // normal from central differences, encoded as (n + 1) / 2
      const dx = (at(x + 1, y) - at(x - 1, y)) * 2;
      const dy = (at(x, y + 1) - at(x, y - 1)) * 2;
      const len = Math.hypot(dx, dy, 1);
      normal.set([-dx / len, -dy / len, 1 / len].map((c) => Math.round((c + 1) * 127.5)), i * 3);
      roughness[i] = Math.round(255 * (0.85 - 0.6 * h)); // bumps are polished, the base is rough
    }
  }
  return {
    artifacts: [
      { name: 'albedo.png', contentType: 'image/png', data: encodePng(size, size, 3, albedo) },
      { name: 'normal.png', contentType: 'image/png', data: encodePng(size, size, 3, normal) },
      { name: 'roughness.png', contentType: 'image/png', data: encodePng(size, size, 1, roughness) },
    ],
    extra: { resolution: size },
  };
};
