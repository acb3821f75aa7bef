/**
 * A small .glb reader, the other half of glb.ts: the 12-byte header, the JSON chunk and the
 * BIN chunk, and the accessors of one triangle primitive. What it cannot read (external
 * buffers, sparse accessors, non-triangle modes, a damaged file) throws a GlbError saying what.
 */

export class GlbError extends Error {}

type Json = Record<string, any>;

const COMPONENTS: Record<number, { bytes: number; read: (v: DataView, at: number) => number }> = {
  5120: { bytes: 1, read: (v, at) => v.getInt8(at) },
  5121: { bytes: 1, read: (v, at) => v.getUint8(at) },
  5122: { bytes: 2, read: (v, at) => v.getInt16(at, true) },
  5123: { bytes: 2, read: (v, at) => v.getUint16(at, true) },
  5125: { bytes: 4, read: (v, at) => v.getUint32(at, true) },
  5126: { bytes: 4, read: (v, at) => v.getFloat32(at, true) },
};
const SIZES: Record<string, number> = { SCALAR: 1, VEC2: 2, VEC3: 3, VEC4: 4, MAT2: 4, MAT3: 9, MAT4: 16 };
const TRIANGLES = 4;
/** Elements an accessor may have: the demo reads them into arrays. */
const MAX_ELEMENTS = 2_000_000;

export interface Glb {
  json: Json;
  bin: Buffer;
}

/** The JSON and BIN chunks of a .glb (glTF 2.0). */
export function readGlb(data: Buffer): Glb {
  if (data.length < 20 || data.toString('latin1', 0, 4) !== 'glTF') throw new GlbError('not a .glb (no glTF header)');
  if (data.readUInt32LE(4) !== 2) throw new GlbError(`a .glb of glTF version ${data.readUInt32LE(4)}, not 2`);
  const total = data.readUInt32LE(8);
  if (total > data.length) throw new GlbError(`truncated .glb: its header says ${total} bytes, ${data.length} arrived`);
  let json: Json | null = null;
  let bin: Buffer = Buffer.alloc(0);
  for (let pos = 12; pos + 8 <= total; ) {
    const length = data.readUInt32LE(pos);
    const type = data.readUInt32LE(pos + 4);
    if (pos + 8 + length > total) throw new GlbError('truncated .glb: a chunk runs past the end');
    const body = data.subarray(pos + 8, pos + 8 + length);
    if (pos === 12 && type !== 0x4e4f534a) throw new GlbError('damaged .glb: the first chunk is not JSON');
    if (type === 0x4e4f534a) {
      try {
        json = JSON.parse(body.toString('utf8')) as Json;
      } catch (err) {
        throw new GlbError(`damaged .glb: its JSON chunk does not parse (${(err as Error).message})`);
      }
    } else if (type === 0x004e4942) bin = body;
    pos += 8 + length;
  }
  if (!json || typeof json !== 'object') throw new GlbError('damaged .glb: no JSON chunk');
  return { json, bin };
}

/** Accessor `index` as numbers, `count * size` of them, read through its buffer view (byteStride honoured). */
export function readAccessor({ json, bin }: Glb, index: unknown): { values: number[]; size: number; componentType: number } {
  const acc = typeof index === 'number' ? json.accessors?.[index] : undefined;
  if (!acc) throw new GlbError(`the .glb has no accessor ${String(index)}`);
  if (acc.sparse) throw new GlbError('sparse accessors are not supported by the demo engine');
  const component = COMPONENTS[acc.componentType];
  const size = SIZES[acc.type];
  if (!component || !size || !Number.isInteger(acc.count) || acc.count < 0) throw new GlbError(`accessor ${index} has an unknown type`);
  if (acc.count > MAX_ELEMENTS) throw new GlbError(`accessor ${index} has ${acc.count} elements, more than the demo engine reads (${MAX_ELEMENTS})`);
  const view = json.bufferViews?.[acc.bufferView];
  if (!view) throw new GlbError(`accessor ${index} has no buffer view`);
  if ((view.buffer ?? 0) !== 0 || json.buffers?.[0]?.uri !== undefined) throw new GlbError('buffers outside the .glb are not supported by the demo engine');
  const start = (view.byteOffset ?? 0) + (acc.byteOffset ?? 0);
  const element = component.bytes * size;
  const stride = view.byteStride ?? element;
  const end = acc.count === 0 ? start : start + stride * (acc.count - 1) + element;
  if (end > (view.byteOffset ?? 0) + view.byteLength || end > bin.length) throw new GlbError(`accessor ${index} runs past the end of the binary chunk`);
  const dv = new DataView(bin.buffer, bin.byteOffset, bin.byteLength);
  const values = new Array<number>(acc.count * size);
  for (let i = 0; i < acc.count; i++) {
    for (let c = 0; c < size; c++) values[i * size + c] = component.read(dv, start + i * stride + c * component.bytes);
  }
  return { values, size, componentType: acc.componentType };
}

export interface MeshGeometry {
  positions: Float32Array;
  normals?: Float32Array;
  uvs?: Float32Array;
  /** Absent when the primitive draws its vertices in order. */
  indices?: Uint16Array | Uint32Array;
  /** The primitive's material's base colour factor, if it has one. */
  baseColor?: number[];
}

/** The geometry of the first primitive of the first mesh: positions, and normals, UVs and indices when it has them. */
export function readMeshGeometry(data: Buffer): MeshGeometry {
  const glb = readGlb(data);
  const prim = glb.json.meshes?.[0]?.primitives?.[0];
  if (!prim || typeof prim.attributes !== 'object') throw new GlbError('the .glb has no mesh');
  if ((prim.mode ?? TRIANGLES) !== TRIANGLES) throw new GlbError(`the mesh is drawn in mode ${prim.mode}, not triangles`);
  const float = (name: string, size: number): Float32Array | undefined => {
    if (prim.attributes[name] === undefined) return undefined;
    const acc = readAccessor(glb, prim.attributes[name]);
    if (acc.size !== size || acc.componentType !== 5126) throw new GlbError(`the mesh's ${name} is not ${size} floats a vertex`);
    return new Float32Array(acc.values);
  };
  const positions = float('POSITION', 3);
  if (!positions || positions.length === 0) throw new GlbError('the mesh has no vertex positions');
  const vertices = positions.length / 3;
  const normals = float('NORMAL', 3);
  const uvs = float('TEXCOORD_0', 2);
  for (const [name, a, size] of [['NORMAL', normals, 3], ['TEXCOORD_0', uvs, 2]] as const) {
    if (a && a.length !== vertices * size) throw new GlbError(`the mesh's ${name} count differs from its POSITION count`);
  }
  let indices: Uint16Array | Uint32Array | undefined;
  if (prim.indices !== undefined) {
    const acc = readAccessor(glb, prim.indices);
    if (acc.size !== 1 || ![5121, 5123, 5125].includes(acc.componentType)) throw new GlbError('the mesh has indices that are not unsigned integers');
    if (acc.values.some((i) => i >= vertices)) throw new GlbError('the mesh has an index past its last vertex');
    indices = vertices > 0xffff ? Uint32Array.from(acc.values) : Uint16Array.from(acc.values);
  }
  const triangles = indices ? indices.length : vertices;
  if (triangles % 3 !== 0 || triangles === 0) throw new GlbError('the mesh is not made of whole triangles');
  const factor = glb.json.materials?.[prim.material]?.pbrMetallicRoughness?.baseColorFactor;
  const baseColor = Array.isArray(factor) && factor.length === 4 && factor.every((v) => typeof v === 'number') ? (factor as number[]) : undefined;
  return { positions, normals, uvs, indices, baseColor };
}
