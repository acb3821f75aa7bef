/**
 * What the page says about a .glb beside the viewer, read from its JSON chunk only (the binary
 * chunk is never walked): vertex and triangle counts from the accessors' counts, and the
 * skeleton of a rigged mesh (skins[].joints, named by their nodes).
 */

export interface GlbStats {
  vertices: number;
  triangles: number;
  /** The joints of every skin, each once. */
  bones: number;
  /** Their node names, in the skins' order (a joint without a name: `joint <node index>`). */
  boneNames: string[];
}

type Json = Record<string, any>;
const JSON_CHUNK = 0x4e4f534a;
const TRIANGLES = 4;

/** The JSON chunk of a .glb (glTF 2.0 binary), or an Error saying why not. */
export function glbJson(bytes: ArrayBuffer): Json {
  const v = new DataView(bytes);
  if (bytes.byteLength < 20 || v.getUint32(0, true) !== 0x46546c67 /* glTF */) throw new Error('not a .glb file');
  const length = v.getUint32(12, true);
  if (v.getUint32(16, true) !== JSON_CHUNK || 20 + length > bytes.byteLength) throw new Error('a damaged .glb file (no JSON chunk)');
  return JSON.parse(new TextDecoder().decode(new Uint8Array(bytes, 20, length))) as Json;
}

export function glbStats(json: Json): GlbStats {
  let vertices = 0;
  let triangles = 0;
  for (const mesh of Array.isArray(json.meshes) ? json.meshes : []) {
    for (const prim of Array.isArray(mesh?.primitives) ? mesh.primitives : []) {
      const positions = Number(json.accessors?.[prim?.attributes?.POSITION]?.count ?? 0);
      vertices += positions;
      if ((prim.mode ?? TRIANGLES) !== TRIANGLES) continue;
      const drawn = prim.indices !== undefined ? Number(json.accessors?.[prim.indices]?.count ?? 0) : positions;
      triangles += Math.floor(drawn / 3);
    }
  }
  const joints: number[] = [];
  for (const skin of Array.isArray(json.skins) ? json.skins : []) {
    for (const j of Array.isArray(skin?.joints) ? skin.joints : []) if (!joints.includes(j)) joints.push(j);
  }
  const boneNames = joints.map((j) => {
    const name = json.nodes?.[j]?.name;
    return typeof name === 'string' && name ? name : `joint ${j}`;
  });
  return { vertices, triangles, bones: joints.length, boneNames };
}
