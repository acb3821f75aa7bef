import { useEffect, useRef, useState } from 'preact/hooks';
import { formatBytes } from '../lib/format.js';
import { errorMessage, localUrl } from '../lib/gateway.js';
import type { OutputFile } from './output-file.js';
import { drawWaveform } from './waveform.js';

/** Files past this size are played but not fetched whole for a waveform (decoded, they take ten times as much memory). */
export const WAVEFORM_CAP_BYTES = 50 * 1024 * 1024;

/** Seconds as `m:ss.s`. */
const clock = (s: number) => `${Math.floor(s / 60)}:${(s % 60).toFixed(1).padStart(4, '0')}`;

/**
 * An audio file: the browser's player, its length, and its waveform drawn from the decoded
 * samples (the file is fetched and decoded with WebAudio; the canvas carries a text label).
 */
export function AudioViewer({ file }: { file: OutputFile }) {
  const src = localUrl(file.url);
  const canvas = useRef<HTMLCanvasElement>(null);
  const [duration, setDuration] = useState<number | null>(null);
  const [wave, setWave] = useState<'loading' | 'drawn' | Error>('loading');

  useEffect(() => {
    let gone = false;
    (async () => {
      if ((file.size ?? 0) > WAVEFORM_CAP_BYTES) throw new Error(`the file is larger than ${formatBytes(WAVEFORM_CAP_BYTES)}`);
      const res = await fetch(src);
      if (!res.ok) throw new Error(`the gateway answered ${res.status}`);
      const bytes = await res.arrayBuffer();
      // An offline context decodes without asking to play anything (no autoplay policy).
      const audio = await new OfflineAudioContext(1, 1, 44_100).decodeAudioData(bytes);
      if (gone || !canvas.current) return;
      drawWaveform(canvas.current, audio);
      setDuration((d) => d ?? audio.duration);
      setWave('drawn');
    })().catch((err: unknown) => !gone && setWave(err instanceof Error ? err : new Error(String(err))));
    return () => {
      gone = true;
    };
  }, [src, file.size]);

  const waveLabel = wave === 'drawn' ? `Waveform of ${file.name}${duration ? `, ${clock(duration)} long` : ''}` : `Waveform of ${file.name} (not drawn)`;
  return (
    <div class="audio-view">
      <audio controls preload="metadata" src={src} onLoadedMetadata={(e) => Number.isFinite(e.currentTarget.duration) && setDuration(e.currentTarget.duration)}>
        <a href={src}>Download {file.name}</a>
      </audio>
      <p class="hint">Length: {duration === null ? '…' : <span data-audio-duration>{clock(duration)}</span>}</p>
      <canvas ref={canvas} class="waveform" width={800} height={120} role="img" aria-label={waveLabel} data-waveform={wave instanceof Error ? 'error' : wave} />
      {wave instanceof Error ? <p class="hint">The waveform could not be drawn: {errorMessage(wave)}</p> : null}
    </div>
  );
}
