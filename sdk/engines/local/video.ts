import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describeInput } from '../demo/files.js';
import { int, num, str } from '../demo/inputs.js';
import { palette, type Rgb } from '../demo/palette.js';
import { Rng, seedFor } from '../demo/seed.js';
import type { CommandJob, CommandRecipe } from '../command/index.js';

export const VIDEO_KIND = 'inference:video:generate';

/** Where Debian (fonts-dejavu-core, which ffmpeg pulls in through fontconfig) and others keep a plain font. */
const FONTS = ['/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf', '/usr/share/fonts/dejavu/DejaVuSans.ttf', '/usr/share/fonts/TTF/DejaVuSans.ttf'];
/** The prompt drawn on the frames is cut: one line that fits the frame. */
const MAX_CAPTION = 60;

const hex = (rgb: Rgb) => `0x${rgb.map((c) => c.toString(16).padStart(2, '0')).join('')}`;
const even = (n: number) => Math.max(2, Math.round(n / 2) * 2);

/** A path inside a filtergraph option, single-quoted: nothing in it may end the quote. */
function quoted(file: string): string {
  if (/['\\:]/.test(file)) throw new Error(`cannot pass ${file} to an ffmpeg filter`);
  return `'${file}'`;
}

interface Plan {
  width: number;
  height: number;
  fps: number;
  frames: number;
  /** The last `frame=` ffmpeg reported. */
  done: number;
}

/**
 * inference:video:generate with ffmpeg: an H.264 MP4 every browser plays (yuv420p, the index up
 * front with +faststart). From the input image, a slow zoom into it (zoompan); from a prompt
 * alone, moving gradients in the prompt's colours (a colour it names, else seeded by it). The
 * prompt is drawn on the frames when a font is found; its text reaches ffmpeg through a file,
 * never through the filtergraph, so no character of it can change the filters.
 */
export function videoRecipe(ffmpeg: string, font: string | null = FONTS.find((f) => existsSync(f)) ?? null): CommandRecipe {
  const plans = new WeakMap<CommandJob, Plan>();
  return {
    async argv(job) {
      const { input } = job;
      const fps = int(input, 'fps', 24, 1, 60);
      const duration = num(input, 'duration_s', 2, 0.04, 60);
      const plan: Plan = { width: even(num(input, 'width', 640, 64, 1920)), height: even(num(input, 'height', 360, 64, 1080)), fps, frames: Math.max(1, Math.round(duration * fps)), done: 0 };
      plans.set(job, plan);
      const { width: w, height: h, frames } = plan;
      const filters: string[] = [];
      let source: string[];
      if (str(input, 'image')) {
        source = ['-loop', '1', '-framerate', String(fps), '-i', str(input, 'image')];
        // Upscaled first: zoompan moves in whole pixels, which judders at the output size.
        filters.push(`scale=${w * 2}:${h * 2}:force_original_aspect_ratio=increase`, `crop=${w * 2}:${h * 2}`);
        filters.push(`zoompan=z='1+0.25*in/${Math.max(1, frames - 1)}':x='iw/2-(iw/zoom/2)':y='ih/2-(ih/zoom/2)':d=1:s=${w}x${h}:fps=${fps}`);
      } else {
        const [c0, c1] = palette(str(input, 'prompt'), new Rng(seedFor(job.kind, input)));
        source = ['-f', 'lavfi', '-i', `gradients=s=${w}x${h}:r=${fps}:c0=${hex(c0)}:c1=${hex(c1)}:speed=0.015:d=${frames / fps}`];
      }
      const prompt = str(input, 'prompt').replace(/\s+/g, ' ').trim();
      if (prompt && font) {
        const caption = path.join(job.workDir, 'caption.txt');
        await writeFile(caption, prompt.length > MAX_CAPTION ? `${prompt.slice(0, MAX_CAPTION - 1)}…` : prompt);
        filters.push(
          `drawtext=fontfile=${quoted(font)}:textfile=${quoted(caption)}:expansion=none:fontcolor=white:fontsize=${Math.round(h / 16)}:box=1:boxcolor=black@0.45:boxborderw=${Math.round(h / 60)}:x=(w-text_w)/2:y=h-text_h-h/10+h/50*sin(2*t)`,
        );
      } else if (prompt) job.ctx.log('no font found: the prompt is not drawn on the video');
      return [
        ffmpeg, '-nostdin', '-hide_banner', '-loglevel', 'error', '-y', ...source,
        ...(filters.length ? ['-vf', filters.join(',')] : []),
        '-frames:v', String(frames), '-r', String(fps),
        '-c:v', 'libx264', '-preset', 'veryfast', '-crf', '23', '-pix_fmt', 'yuv420p', '-movflags', '+faststart',
        '-progress', 'pipe:1', '-nostats', path.join(job.outputDir, 'video.mp4'),
      ];
    },
    // `-progress pipe:1` writes key=value lines; frame= counts the frames encoded.
    stdout(line, job) {
      const m = /^frame=(\d+)$/.exec(line);
      const plan = plans.get(job);
      if (!m || !plan) return;
      plan.done = Number(m[1]);
      job.ctx.progress(Math.min(0.99, plan.done / plan.frames), 'encoding');
    },
    badInput: /Invalid data found when processing input|could not find codec parameters|Error opening input/i,
    async result(job) {
      const plan = plans.get(job)!;
      const frames = plan.done || plan.frames;
      const image = str(job.input, 'image') ? await job.ctx.inputFile('image') : null;
      return {
        width: plan.width,
        height: plan.height,
        fps: plan.fps,
        frames,
        duration_s: Math.round((frames / plan.fps) * 1000) / 1000,
        encoder: 'ffmpeg libx264',
        ...(image ? { input: describeInput('image', { file: image, data: Buffer.alloc(0) }) } : {}),
      };
    },
  };
}
