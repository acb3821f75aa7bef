import { GltfBuilder } from './glb.js';
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

/** inference:rig: a skinned .glb with a small joint chain (3 to 5 joints, from the input's hash). */
export const rig: DemoFamily = async ({ input, rng }) => {
  const jointCount = 3 + rng.int(3);
  const tube = skinnedTube(jointCount, rng.range(0.15, 0.4));
  const [colour] = palette(str(input, 'mesh'), rng);
  const gltf = new GltfBuilder();
  gltf.json.materials.push({ name: 'skin', pbrMetallicRoughness: { baseColorFactor: [...colour.map((c) => c / 255), 1], metallicFactor: 0, roughnessFactor: 0.8 } });
  gltf.json.meshes.push({
    name: 'body',
    primitives: [
      {
        attributes: {
          POSITION: gltf.accessor(tube.positions, 5126, 'VEC3', 'vertex'),
          NORMAL: gltf.accessor(tube.normals, 5126, 'VEC3', 'vertex'),
          JOINTS_0: gltf.accessor(tube.joints, 5121, 'VEC4', 'vertex'),
          WEIGHTS_0: gltf.accessor(tube.weights, 5126, 'VEC4', 'vertex'),
        },
        indices: gltf.accessor(tube.indices, 5123, 'SCALAR', 'index'),
        material: 0,
      },
    ],
  });
  const inverseBindMatrices = gltf.accessor(tube.ibm, 5126, 'MAT4', 'other');
  // node 0 is the skinned mesh (a scene root, no transform, as the spec recommends); nodes 1.. are the joint chain
  gltf.json.nodes.push({ name: 'body', mesh: 0, skin: 0 });
  const jointNodes: number[] = [];
  for (let i = 0; i < jointCount; i++) {
    const node: Record<string, unknown> = { name: `joint_${i}`, translation: [0, i === 0 ? 0 : tube.bone, 0] };
    if (i + 1 < jointCount) node.children = [gltf.json.nodes.length + 1];
    jointNodes.push(gltf.json.nodes.push(node) - 1);
  }
  Object.assign(gltf.json, {
    skins: [{ name: 'skeleton', joints: jointNodes, inverseBindMatrices, skeleton: jointNodes[0] }],
    scenes: [{ nodes: [0, jointNodes[0]] }],
    scene: 0,
  });
  return { artifacts: [{ name: 'rig.glb', contentType: 'model/gltf-binary', data: gltf.toGlb() }], extra: { joints: jointCount } };
};
