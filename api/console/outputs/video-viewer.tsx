import { localUrl } from '../lib/gateway.js';
import type { OutputFile } from './output-file.js';

/** An MP4 or WebM video in the browser's player. */
export function VideoViewer({ file, label }: { file: OutputFile; label: string }) {
  const src = localUrl(file.url);
  return (
    <video class="video-view" controls preload="metadata" src={src} aria-label={label}>
      <a href={src}>Download {file.name}</a>
    </video>
  );
}

/** A video type browsers do not play (the demo engine's Motion-JPEG AVI): say so, and point at the download. */
export function UnplayableVideo({ file }: { file: OutputFile }) {
  return (
    <p class="note">
      Browsers do not play {file.content_type ?? 'this type of'} video. Download {file.name} and open it in a video player (VLC or mpv play it).
    </p>
  );
}
