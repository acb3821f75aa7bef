import { describeInput, readInputMesh } from './files.js';
import { GltfBuilder } from './glb.js';
import type { MeshGeometry } from './glb-read.js';
import type { DemoFamily } from './job.js';
import { int, str } from './inputs.js';
import { mix, palette } from './palette.js';
import { encodePng } from './png.js';

const MAX_SIDE = 256;

/** UVs for a mesh that has none: each position projected on the two longest sides of the bounding box, scaled to [0, 1]. */
function planarUvs(positions: Float32Array): Float32Array {
  const min = [Infinity, Infinity, Infinity];
  const max = [-Infinity, -Infinity, -Infinity];
  for (let i = 0; i < positions.length; i++) {
    min[i % 3] = Math.min(min[i % 3], positions[i]);
    max[i % 3] = Math.max(max[i % 3], positions[i]);
  }
  const span = [0, 1, 2].map((a) => max[a] - min[a] || 1);
  const [u, v] = [0, 1, 2].sort((a, b) => span[b] - span[a] || a - b);
  const uvs = new Float32Array((positions.length / 3) * 2);
  for (let i = 0; i < positions.length / 3; i++) {
    uvs[i * 2] = (positions[i * 3 + u] - min[u]) / span[u];
    uvs[i * 2 + 1] = 1 - (positions[i * 3 + v] - min[v]) / span[v];
  }
  return uvs;
}

/** The input mesh with the maps as its material: its geometry as it came, UVs added when it had none. */
function texturedMesh(geo: MeshGeometry, albedo: Buffer, normal: Buffer, metallicRoughness: Buffer, extras: Record<string, unknown>): Buffer {
  const gltf = new GltfBuilder();
  (gltf.json.asset as Record<string, unknown>).extras = extras;
  const material: Record<string, unknown> = {
    name: 'demo-texture',
    pbrMetallicRoughness: { baseColorTexture: { index: gltf.pngTexture(albedo) }, metallicRoughnessTexture: { index: gltf.pngTexture(metallicRoughness) } },
  };
  if (geo.normals) material.normalTexture = { index: gltf.pngTexture(normal) };
  gltf.json.materials.push(material);
  const attributes: Record<string, number> = { POSITION: gltf.accessor(geo.positions, 5126, 'VEC3', 'vertex') };
  if (geo.normals) attributes.NORMAL = gltf.accessor(geo.normals, 5126, 'VEC3', 'vertex');
  attributes.TEXCOORD_0 = gltf.accessor(geo.uvs ?? planarUvs(geo.positions), 5126, 'VEC2', 'vertex');
  const primitive: Record<string, unknown> = { attributes, material: 0 };
  if (geo.indices) primitive.indices = gltf.accessor(geo.indices, geo.indices instanceof Uint32Array ? 5125 : 5123, 'SCALAR', 'index');
  gltf.json.meshes.push({ name: 'textured', primitives: [primitive] });
  gltf.json.nodes.push({ name: 'textured', mesh: 0 });
  Object.assign(gltf.json, { scenes: [{ nodes: [0] }], scene: 0 });
  return gltf.toGlb();
}

/**
 * inference:texture:generate: a PBR set (albedo, tangent-space normal, roughness) from one seeded
 * height field of round bumps, so the three maps agree with each other the way real ones do; and
 * the input mesh wearing them (textured.glb), its geometry kept, asset.extras.input naming it.
 */
export const texture: DemoFamily = async ({ input, rng, ctx }) => {
  const mesh = await readInputMesh(ctx, input, 'mesh');
  const read = mesh?.read;
  const geo = mesh?.geo;
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
  const maps = {
    albedo: encodePng(size, size, 3, albedo),
    normal: encodePng(size, size, 3, normal),
    roughness: encodePng(size, size, 1, roughness),
  };
  const artifacts = [
    { name: 'albedo.png', contentType: 'image/png', data: maps.albedo },
    { name: 'normal.png', contentType: 'image/png', data: maps.normal },
    { name: 'roughness.png', contentType: 'image/png', data: maps.roughness },
  ];
  if (!geo || !read) return { artifacts, extra: { resolution: size } };
  // glTF reads roughness from the green channel (metalness, blue, stays 0)
  const metallicRoughness = new Uint8Array(size * size * 3);
  roughness.forEach((r, i) => (metallicRoughness[i * 3 + 1] = r));
  const inputInfo = describeInput('mesh', read);
  const glb = texturedMesh(geo, maps.albedo, maps.normal, encodePng(size, size, 3, metallicRoughness), { input: inputInfo });
  artifacts.push({ name: 'textured.glb', contentType: 'model/gltf-binary', data: glb });
  return { artifacts, extra: { resolution: size, input: inputInfo } };
};
