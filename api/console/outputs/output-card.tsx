import type { Capabilities, JobResult } from '../../../sdk/client/index.js';
import { AudioViewer } from './audio-viewer.js';
import { ChainActions } from './chain-actions.js';
import { FileFacts } from './file-facts.js';
import { ImageViewer } from './image-viewer.js';
import { MeshViewer } from './mesh-viewer.js';
import { viewerFor, type OutputFile } from './output-file.js';
import { TextViewer } from './text-viewer.js';
import { UnplayableVideo, VideoViewer } from './video-viewer.js';

export interface OutputCardProps {
  run: JobResult;
  file: OutputFile;
  caps: Capabilities | null;
  /** Its heading (the file name, or what the file is, e.g. "Normal map"). */
  title: string;
  /** What the run was for, in words (alt text and labels start with it). */
  subject: string;
  level?: 3 | 4;
  /** Its place in `output.files` (ids in the page). */
  index: number;
}

/** One file of a run: shown by its type, its facts, its download link and where it can go next. */
export function OutputCard({ run, file, caps, title, subject, level = 3, index }: OutputCardProps) {
  const Heading = level === 3 ? 'h3' : 'h4';
  const id = `output-file-${index}`;
  const label = `${title} (${file.name}) of ${subject}`;
  const viewer = viewerFor(file);
  return (
    <article class={`output-card output-${viewer}`} aria-labelledby={id} data-output-file={file.name}>
      <Heading id={id}>{title}</Heading>
      {viewer === 'image' ? <ImageViewer file={file} alt={label} /> : null}
      {viewer === 'mesh' ? <MeshViewer file={file} label={`3D view of ${label}`} /> : null}
      {viewer === 'audio' ? <AudioViewer file={file} /> : null}
      {viewer === 'video' ? <VideoViewer file={file} label={label} /> : null}
      {viewer === 'video-other' ? <UnplayableVideo file={file} /> : null}
      {viewer === 'text' ? <TextViewer file={file} /> : null}
      <FileFacts file={file} />
      <ChainActions run={run} file={file} caps={caps} />
    </article>
  );
}
