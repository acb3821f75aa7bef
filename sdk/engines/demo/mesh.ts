import { GltfBuilder } from './glb.js';
import { describeInput, meanColour, readInputImage, resample } from './files.js';
import type { DemoFamily } from './job.js';
import { str } from './inputs.js';
import { mix, palette, type Rgb } from './palette.js';
import { encodePng } from './png.js';
import type { Rng } from './seed.js';

type Vec3 = [number, number, number];

const cross = (a: Vec3, b: Vec3): Vec3 => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];

/** Each face: outward normal n and in-plane axis u; v = n x u keeps the winding counter-clockwise from outside. */
const FACES: Array<[Vec3, Vec3]> = [
  [[1, 0, 0], [0, 1, 0]],
  [[-1, 0, 0], [0, 0, 1]],
  [[0, 1, 0], [0, 0, 1]],
  [[0, -1, 0], [1, 0, 0]],
  [[0, 0, 1], [1, 0, 0]],
  [[0, 0, -1], [0, 1, 0]],
];

/** A box of the given half-sizes, with per-face normals and UVs (24 vertices, 12 triangles). */
export function box(half: Vec3) {
  const positions: number[] = [];
  const normals: number[] = [];
  const uvs: number[] = [];
  const indices: number[] = [];
  for (const [n, u] of FACES) {
    const v = cross(n, u);
    const base = positions.length / 3;
    for (const [su, sv] of [[-1, -1], [1, -1], [1, 1], [-1, 1]]) {
      positions.push(...[0, 1, 2].map((i) => (n[i] + su * u[i] + sv * v[i]) * half[i]));
      normals.push(...n);
      uvs.push((su + 1) / 2, (1 - sv) / 2);
    }
    indices.push(base, base + 1, base + 2, base, base + 2, base + 3);
  }
  return { positions: new Float32Array(positions), normals: new Float32Array(normals), uvs: new Float32Array(uvs), indices: new Uint16Array(indices) };
}

/** A 32x32 checker texture in the job's colours (power of two, so mipmapping is valid). */
function checker(main: Rgb, accent: Rgb, rng: Rng): Buffer {
  const size = 32;
  const cells = 2 + rng.int(4);
  const px = new Uint8Array(size * size * 3);
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const odd = (Math.floor((x * cells) / size) + Math.floor((y * cells) / size)) % 2;
      px.set(odd ? accent : mix(main, accent, y / size / 3), (y * size + x) * 3);
    }
  }
  return encodePng(size, size, 3, px);
}

/** The side of the texture made from an input image (power of two, so mipmapping is valid). */
const TEXTURE_SIDE = 32;

/**
 * image-to-mesh and text-to-mesh: a textured box. From a prompt, its proportions and colours are
 * seeded by the input; from an image, the box has the image's aspect ratio, its texture is the
 * image scaled to 32x32, and asset.extras.input names the image (sha256, size, mean colour).
 */
export const mesh: DemoFamily = async ({ kind, input, rng, ctx }) => {
  const picture = kind === 'inference:3d:image-to-mesh' ? await readInputImage(ctx, input, 'image') : null;
  const gltf = new GltfBuilder();
  let geo: ReturnType<typeof box>;
  let texture: number;
  let extra: Record<string, unknown> | undefined;
  if (picture) {
    const { image, read } = picture;
    const longest = Math.max(image.width, image.height);
    geo = box([Math.max(0.1, image.width / longest), Math.max(0.1, image.height / longest), rng.range(0.3, 1)]);
    texture = gltf.pngTexture(encodePng(TEXTURE_SIDE, TEXTURE_SIDE, 3, resample(image, TEXTURE_SIDE, TEXTURE_SIDE)));
    const mean = meanColour(image, 0, 0, image.width, image.height);
    extra = { input: { ...describeInput('image', read), width: image.width, height: image.height, mean_rgb: mean } };
    (gltf.json.asset as Record<string, unknown>).extras = extra;
  } else {
    const [main, accent] = palette(str(input, 'prompt') || str(input, 'image'), rng);
    geo = box([rng.range(0.3, 1), rng.range(0.3, 1), rng.range(0.3, 1)]);
    texture = gltf.pngTexture(checker(main, accent, rng));
  }
  gltf.json.materials.push({
    name: 'demo',
    pbrMetallicRoughness: { baseColorTexture: { index: texture }, metallicFactor: 0, roughnessFactor: Math.round(rng.range(0.3, 0.9) * 100) / 100 },
  });
  gltf.json.meshes.push({
    name: 'demo-shape',
    primitives: [
      {
        attributes: {
          POSITION: gltf.accessor(geo.positions, 5126, 'VEC3', 'vertex'),
          NORMAL: gltf.accessor(geo.normals, 5126, 'VEC3', 'vertex'),
          TEXCOORD_0: gltf.accessor(geo.uvs, 5126, 'VEC2', 'vertex'),
        },
        indices: gltf.accessor(geo.indices, 5123, 'SCALAR', 'index'),
        material: 0,
      },
    ],
  });
  gltf.json.nodes.push({ name: 'demo-shape', mesh: 0 });
  Object.assign(gltf.json, { scenes: [{ nodes: [0] }], scene: 0 });
  return { artifacts: [{ name: 'mesh.glb', contentType: 'model/gltf-binary', data: gltf.toGlb() }], ...(extra ? { extra } : {}) };
};
