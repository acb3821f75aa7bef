import { encodePng } from '../../sdk/engines/demo/png.js';
import { sampleGlb, sampleWav } from './sample-files.js';

/**
 * The nodes the fake ComfyUI (comfyui-server.ts) knows: the real class names and input names of
 * the graphs the engine ships and tests use, from ComfyUI's nodes.py (CheckpointLoaderSimple,
 * CLIPTextEncode, EmptyLatentImage, KSampler, VAEDecode, SaveImage, LoadImage, CLIPVisionEncode),
 * comfy_extras/nodes_hunyuan3d.py (EmptyLatentHunyuan3Dv2, Hunyuan3Dv2Conditioning,
 * VAEDecodeHunyuan3D, VoxelToMesh, SaveGLB: ui `{"3d": [...]}`), nodes_video_model.py
 * (ImageOnlyCheckpointLoader), nodes_model_advanced.py (ModelSamplingAuraFlow) and
 * nodes_audio.py (EmptyLatentAudio, VAEDecodeAudio, SaveAudio: ui `{"audio": [...]}`).
 * Each "runs" on stand-ins for tensors: enough to carry an image's size from EmptyLatentImage to
 * SaveImage, and to write real PNG, GLB and WAV files.
 */

export interface FakeServerState {
  checkpoints: string[];
  /** Files in ComfyUI's input folder (uploads), by name. */
  inputs: Map<string, Buffer>;
  /** Writes an output file; returns its ui entry (SaveImage's counter naming, folder_paths.get_save_image_path). */
  save(prefix: string, ext: string, data: Buffer): { filename: string; subfolder: string; type: string };
}

export interface NodeClass {
  required: string[];
  /** OUTPUT_NODE: ComfyUI runs a prompt for the sake of these. */
  output?: boolean;
  /** A widget check at POST /prompt (validate_inputs); a `node_errors` entry when it fails. */
  validate?(inputs: Record<string, unknown>, state: FakeServerState): { type: string; message: string; details: string } | null;
  /** How many `progress` messages it sends while running (a sampler's steps). */
  steps?(inputs: Record<string, unknown>): number;
  /** Its outputs (one per RETURN_TYPES slot) and, for output nodes, its ui. */
  run(inputs: Record<string, any>, state: FakeServerState): Promise<{ outputs: unknown[]; ui?: Record<string, unknown[]> }>;
}

const pass = (value: unknown, count = 1) => async () => ({ outputs: Array.from({ length: count }, () => value) });
const inList = (field: string, list: (s: FakeServerState) => string[]) => (inputs: Record<string, unknown>, s: FakeServerState) =>
  list(s).includes(inputs[field] as string) ? null : { type: 'value_not_in_list', message: 'Value not in list', details: `${field}: '${inputs[field]}' not in ${JSON.stringify(list(s))}` };

const checkpointLoader: NodeClass = { required: ['ckpt_name'], validate: inList('ckpt_name', (s) => s.checkpoints), run: async (i) => ({ outputs: [{ model: i.ckpt_name }, { clip: i.ckpt_name }, { vae: i.ckpt_name }] }) };

/** A gradient of the size that reached the node, as SaveImage would write the decoded latent. */
function imageOf(image: unknown): Buffer {
  const { width = 64, height = 64 } = (image ?? {}) as { width?: number; height?: number };
  const w = Math.min(width, 2048);
  const h = Math.min(height, 2048);
  return encodePng(w, h, 3, Uint8Array.from({ length: w * h * 3 }, (_, i) => i % 251));
}

export const NODE_CLASSES: Record<string, NodeClass> = {
  CheckpointLoaderSimple: checkpointLoader,
  ImageOnlyCheckpointLoader: checkpointLoader,
  CLIPTextEncode: { required: ['text', 'clip'], run: async (i) => ({ outputs: [{ text: i.text }] }) },
  EmptyLatentImage: { required: ['width', 'height', 'batch_size'], run: async (i) => ({ outputs: [{ width: i.width, height: i.height }] }) },
  KSampler: {
    required: ['model', 'seed', 'steps', 'cfg', 'sampler_name', 'scheduler', 'positive', 'negative', 'latent_image', 'denoise'],
    steps: (i) => Number(i.steps),
    run: async (i) => ({ outputs: [i.latent_image] }),
  },
  VAEDecode: { required: ['samples', 'vae'], run: async (i) => ({ outputs: [i.samples] }) },
  SaveImage: {
    required: ['images', 'filename_prefix'],
    output: true,
    run: async (i, s) => ({ outputs: [], ui: { images: [s.save(String(i.filename_prefix), 'png', imageOf(i.images))] } }),
  },
  LoadImage: {
    required: ['image'],
    // nodes.py LoadImage.VALIDATE_INPUTS: the file must be in the input folder.
    validate: (i, s) => (s.inputs.has(String(i.image)) ? null : { type: 'custom_validation_failed', message: 'Custom validation failed for node', details: `image - Invalid image file: ${i.image}` }),
    run: async (i) => ({ outputs: [{ loaded: i.image }, { mask: i.image }] }),
  },
  CLIPVisionEncode: { required: ['clip_vision', 'image', 'crop'], run: pass({ clip_vision_output: true }) },
  Hunyuan3Dv2Conditioning: { required: ['clip_vision_output'], run: pass({ conditioning: true }, 2) },
  EmptyLatentHunyuan3Dv2: { required: ['resolution', 'batch_size'], run: pass({ latent: '3d' }) },
  ModelSamplingAuraFlow: { required: ['model', 'shift'], run: async (i) => ({ outputs: [i.model] }) },
  VAEDecodeHunyuan3D: { required: ['samples', 'vae', 'num_chunks', 'octree_resolution'], run: pass({ voxel: true }) },
  VoxelToMesh: { required: ['voxel', 'algorithm', 'threshold'], steps: () => 4, run: pass({ mesh: true }) },
  SaveGLB: { required: ['mesh', 'filename_prefix'], output: true, run: async (i, s) => ({ outputs: [], ui: { '3d': [s.save(String(i.filename_prefix), 'glb', await sampleGlb())] } }) },
  EmptyLatentAudio: { required: ['seconds', 'batch_size'], run: pass({ latent: 'audio' }) },
  VAEDecodeAudio: { required: ['samples', 'vae'], run: pass({ audio: true }) },
  // The real SaveAudio writes FLAC; this one writes a WAV (as custom WAV savers do), the file type the audio kinds deliver.
  SaveAudio: { required: ['audio', 'filename_prefix'], output: true, run: async (i, s) => ({ outputs: [], ui: { audio: [s.save(String(i.filename_prefix), 'wav', sampleWav())] } }) },
};
