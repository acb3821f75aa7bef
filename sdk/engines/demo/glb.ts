/**
 * A small glTF 2.0 builder that packs everything into one binary buffer and writes a .glb
 * (12-byte header, a JSON chunk and a BIN chunk, each padded to 4 bytes as the spec requires).
 */

const ARRAY_BUFFER = 34962;
const ELEMENT_ARRAY_BUFFER = 34963;
const COMPONENT = { 5121: Uint8Array, 5123: Uint16Array, 5125: Uint32Array, 5126: Float32Array } as const;
type ComponentType = keyof typeof COMPONENT;
const SIZE = { SCALAR: 1, VEC2: 2, VEC3: 3, VEC4: 4, MAT4: 16 } as const;
type AccessorType = keyof typeof SIZE;

export type Json = Record<string, unknown>;

export class GltfBuilder {
  readonly json: Json & {
    accessors: Json[];
    bufferViews: Json[];
    materials: Json[];
    meshes: Json[];
    nodes: Json[];
    images?: Json[];
  };
  private chunks: Buffer[] = [];
  private length = 0;

  constructor() {
    this.json = { asset: { version: '2.0', generator: 'Switchyard demo engine' }, accessors: [], bufferViews: [], materials: [], meshes: [], nodes: [] };
  }

  /** Appends bytes as a new buffer view, 4-byte aligned so every accessor type lines up. */
  bufferView(data: Uint8Array, target?: number): number {
    const pad = (4 - (this.length % 4)) % 4;
    if (pad) this.push(Buffer.alloc(pad));
    const view: Json = { buffer: 0, byteOffset: this.length, byteLength: data.byteLength };
    if (target) view.target = target;
    this.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    return this.json.bufferViews.push(view) - 1;
  }

  /**
   * Adds a tightly packed accessor. Vertex attributes and indices get a target; matrices
   * (inverseBindMatrices) must not. POSITION needs min/max, so they are always computed.
   */
  accessor(data: Float32Array | Uint16Array | Uint8Array | Uint32Array, componentType: ComponentType, type: AccessorType, kind: 'vertex' | 'index' | 'other'): number {
    if (!(data instanceof COMPONENT[componentType])) throw new Error('GltfBuilder: data does not match componentType');
    const size = SIZE[type];
    const count = data.length / size;
    const target = kind === 'vertex' ? ARRAY_BUFFER : kind === 'index' ? ELEMENT_ARRAY_BUFFER : undefined;
    const min = new Array<number>(size).fill(Infinity);
    const max = new Array<number>(size).fill(-Infinity);
    for (let i = 0; i < data.length; i++) {
      min[i % size] = Math.min(min[i % size], data[i]);
      max[i % size] = Math.max(max[i % size], data[i]);
    }
    const acc: Json = { bufferView: this.bufferView(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), target), componentType, count, type };
    if (type !== 'MAT4') Object.assign(acc, { min, max });
    return this.json.accessors.push(acc) - 1;
  }

  /** Embeds a PNG as an image + texture and returns the texture index. */
  pngTexture(png: Buffer): number {
    const view = this.bufferView(png);
    const images = (this.json.images ??= []);
    const samplers = ((this.json as Json).samplers ??= [{ magFilter: 9729, minFilter: 9987, wrapS: 10497, wrapT: 10497 }]) as Json[];
    const textures = ((this.json as Json).textures ??= []) as Json[];
    const source = images.push({ bufferView: view, mimeType: 'image/png' }) - 1;
    return textures.push({ source, sampler: samplers.length - 1 }) - 1;
  }

  toGlb(): Buffer {
    const bin = Buffer.concat(this.chunks);
    const json = { ...this.json, buffers: [{ byteLength: bin.length }] };
    const jsonChunk = padTo4(Buffer.from(JSON.stringify(json), 'utf8'), 0x20);
    const binChunk = padTo4(bin, 0);
    const total = 12 + 8 + jsonChunk.length + 8 + binChunk.length;
    const header = Buffer.alloc(12);
    header.write('glTF', 0, 'latin1');
    header.writeUInt32LE(2, 4);
    header.writeUInt32LE(total, 8);
    return Buffer.concat([header, chunkHeader(jsonChunk.length, 0x4e4f534a /* JSON */), jsonChunk, chunkHeader(binChunk.length, 0x004e4942 /* BIN */), binChunk]);
  }

  private push(b: Buffer): void {
    this.chunks.push(b);
    this.length += b.length;
  }
}

function padTo4(b: Buffer, fill: number): Buffer {
  const pad = (4 - (b.length % 4)) % 4;
  return pad ? Buffer.concat([b, Buffer.alloc(pad, fill)]) : b;
}

function chunkHeader(length: number, type: number): Buffer {
  const h = Buffer.alloc(8);
  h.writeUInt32LE(length, 0);
  h.writeUInt32LE(type, 4);
  return h;
}
