/**
 * A waveform on a canvas: for each column, the lowest and highest sample of the stretch of audio
 * it covers (all channels), drawn in the page's accent colour on its muted surface.
 */
export function drawWaveform(canvas: HTMLCanvasElement, audio: AudioBuffer): void {
  const ctx = canvas.getContext('2d');
  if (!ctx) throw new Error('no 2D canvas');
  const { width, height } = canvas;
  const styles = getComputedStyle(canvas);
  ctx.fillStyle = styles.getPropertyValue('--surface-2').trim() || '#eef1f5';
  ctx.fillRect(0, 0, width, height);
  const channels = Array.from({ length: audio.numberOfChannels }, (_, c) => audio.getChannelData(c));
  const per = Math.max(1, Math.floor(audio.length / width));
  const mid = height / 2;
  ctx.fillStyle = styles.getPropertyValue('--accent').trim() || '#1f5fbf';
  for (let x = 0; x < width; x++) {
    let lo = 0;
    let hi = 0;
    const start = Math.floor((x * audio.length) / width);
    for (const data of channels) {
      for (let i = start; i < Math.min(start + per, data.length); i++) {
        if (data[i] < lo) lo = data[i];
        if (data[i] > hi) hi = data[i];
      }
    }
    // At least a pixel, so silence still shows as a line.
    const top = mid - Math.max(hi, 0) * mid;
    ctx.fillRect(x, top, 1, Math.max(1, (Math.max(hi, 0) - Math.min(lo, 0)) * mid));
  }
}
