import { GltfBuilder } from './glb.js';
import { describeInput, readInputMesh } from './files.js';
import type { DemoFamily } from './job.js';
import { str } from './inputs.js';
import { palette } from './palette.js';

const SIDES = 8;
const HEIGHT = 2;

/**
 * A skinned tube standing on the origin: a chain of joints up the Y axis, with rings of vertices
 * at every joint (weighted half/half to the two bones that meet there) and at every bone's middle
 * (weighted fully to that bone). Weights are 1 or 0.5, so they sum to exactly 1.
 */
function skinnedTube(joints: number, radius: number) {
  const bone = HEIGHT / joints;
  const positions: number[] = [];
  const normals: number[] = [];
  const jointIdx: number[] = [];
  const weights: number[] = [];
  const indices: number[] = [];
  const rings = 2 * joints + 1;
  for (let k = 0; k < rings; k++) {
    const y = (k * HEIGHT) / (rings - 1);
    const below = Math.min(Math.floor(k / 2), joints - 1);
    const shared = k % 2 === 0 && k > 0 && k < rings - 1; // ring sitting on a joint between two bones
    for (let s = 0; s < SIDES; s++) {
      const a = (s / SIDES) * Math.PI * 2;
      positions.push(Math.cos(a) * radius, y, Math.sin(a) * radius);
      normals.push(Math.cos(a), 0, Math.sin(a));
      if (shared) {
        jointIdx.push(below - 1, below, 0, 0);
        weights.push(0.5, 0.5, 0, 0);
      } else {
        jointIdx.push(below, 0, 0, 0);
        weights.push(1, 0, 0, 0);
      }
    }
  }
  for (let k = 0; k + 1 < rings; k++) {
    for (let s = 0; s < SIDES; s++) {
      const a = k * SIDES + s;
      const b = k * SIDES + ((s + 1) % SIDES);
      // counter-clockwise seen from outside (normals point away from the Y axis)
      indices.push(a, a + SIDES, b, b, a + SIDES, b + SIDES);
    }
  }
  // inverse bind matrix of joint i undoes its rest translation (0, i*bone, 0); column-major
  const ibm = new Float32Array(16 * joints);
  for (let i = 0; i < joints; i++) ibm.set([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, -i * bone, 0, 1], i * 16);
  return {
    bone,
    positions: new Float32Array(positions),
    normals: new Float32Array(normals),
    joints: new Uint8Array(jointIdx),
    weights: new Float32Array(weights),
    indices: new Uint16Array(indices),
    ibm,
  };
}

/**
 * Skins a mesh read from the input to a chain of joints up the Y axis through the middle of its
 * bounding box, from its lowest point to its highest: each vertex is weighted to the two bones
 * whose middles it lies between, in steps of 1/256 so that the weights sum to exactly 1.
 */
function skinMesh(positions: Float32Array, joints: number) {
  const min = [Infinity, Infinity, Infinity];
  const max = [-Infinity, -Infinity, -Infinity];
  for (let i = 0; i < positions.length; i++) {
    min[i % 3] = Math.min(min[i % 3], positions[i]);
    max[i % 3] = Math.max(max[i % 3], positions[i]);
  }
  const height = max[1] - min[1] > 1e-6 ? max[1] - min[1] : 1;
  const bone = height / joints;
  const root = [(min[0] + max[0]) / 2, min[1], (min[2] + max[2]) / 2];
  const vertices = positions.length / 3;
  const jointIdx = new Uint8Array(vertices * 4);
  const weights = new Float32Array(vertices * 4);
  for (let v = 0; v < vertices; v++) {
    const t = Math.min(joints - 1, Math.max(0, (positions[v * 3 + 1] - min[1]) / bone - 0.5));
    const below = Math.min(Math.floor(t), joints - 2);
    const up = Math.round((t - below) * 256) / 256;
    jointIdx.set([below, Math.min(below + 1, joints - 1), 0, 0], v * 4);
    weights.set([1 - up, up, 0, 0], v * 4);
  }
  const ibm = new Float32Array(16 * joints);
  for (let i = 0; i < joints; i++) ibm.set([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, -root[0], -(root[1] + i * bone), -root[2], 1], i * 16);
  return { bone, root, joints: jointIdx, weights, ibm };
}

/**
 * inference:rig: a skinned .glb with a small joint chain (3 to 5 joints, from the input's hash).
 * The input mesh (its first primitive) keeps its positions, normals, UVs and indices and gets
 * JOINTS_0 and WEIGHTS_0; asset.extras.input names it. Without one, a skinned tube.
 */
export const rig: DemoFamily = async ({ input, rng, ctx }) => {
  const mesh = await readInputMesh(ctx, input, 'mesh');
  const read = mesh?.read;
  const geo = mesh?.geo;
  const jointCount = 3 + rng.int(3);
  const tube = geo ? null : skinnedTube(jointCount, rng.range(0.15, 0.4));
  const skin = geo ? skinMesh(geo.positions, jointCount) : { ...tube!, root: [0, 0, 0] };
  const [colour] = palette(str(input, 'mesh'), rng);
  const baseColorFactor = geo?.baseColor ?? [...colour.map((c) => c / 255), 1];
  const gltf = new GltfBuilder();
  gltf.json.materials.push({ name: 'skin', pbrMetallicRoughness: { baseColorFactor, metallicFactor: 0, roughnessFactor: 0.8 } });
  const positions = geo?.positions ?? tube!.positions;
  const normals = geo ? geo.normals : tube!.normals;
  const indices = geo ? geo.indices : tube!.indices;
  const attributes: Record<string, number> = { POSITION: gltf.accessor(positions, 5126, 'VEC3', 'vertex') };
  if (normals) attributes.NORMAL = gltf.accessor(normals, 5126, 'VEC3', 'vertex');
  if (geo?.uvs) attributes.TEXCOORD_0 = gltf.accessor(geo.uvs, 5126, 'VEC2', 'vertex');
  attributes.JOINTS_0 = gltf.accessor(skin.joints, 5121, 'VEC4', 'vertex');
  attributes.WEIGHTS_0 = gltf.accessor(skin.weights, 5126, 'VEC4', 'vertex');
  const primitive: Record<string, unknown> = { attributes, material: 0 };
  if (indices) primitive.indices = gltf.accessor(indices, indices instanceof Uint32Array ? 5125 : 5123, 'SCALAR', 'index');
  gltf.json.meshes.push({ name: 'body', primitives: [primitive] });
  const inverseBindMatrices = gltf.accessor(skin.ibm, 5126, 'MAT4', 'other');
  // node 0 is the skinned mesh (a scene root, no transform, as the spec recommends); nodes 1.. are the joint chain
  gltf.json.nodes.push({ name: 'body', mesh: 0, skin: 0 });
  const jointNodes: number[] = [];
  for (let i = 0; i < jointCount; i++) {
    const node: Record<string, unknown> = { name: `joint_${i}`, translation: i === 0 ? skin.root : [0, skin.bone, 0] };
    if (i + 1 < jointCount) node.children = [gltf.json.nodes.length + 1];
    jointNodes.push(gltf.json.nodes.push(node) - 1);
  }
  Object.assign(gltf.json, {
    skins: [{ name: 'skeleton', joints: jointNodes, inverseBindMatrices, skeleton: jointNodes[0] }],
    scenes: [{ nodes: [0, jointNodes[0]] }],
    scene: 0,
  });
  const vertices = positions.length / 3;
  const extra: Record<string, unknown> = { joints: jointCount };
  if (read) {
    Object.assign(extra, { vertices, triangles: (indices?.length ?? vertices) / 3, input: describeInput('mesh', read) });
    (gltf.json.asset as Record<string, unknown>).extras = { input: extra.input };
  }
  return { artifacts: [{ name: 'rig.glb', contentType: 'model/gltf-binary', data: gltf.toGlb() }], extra };
};
