import type { ProgressData } from '../../../sdk/client/index.js';

/** The worker's progress (0..1) and its last message; a bar with no value while none was reported. */
export function RunProgress({ progress, running }: { progress: ProgressData | undefined; running: boolean }) {
  const pct = progress ? Math.round(progress.progress * 100) : undefined;
  return (
    <div class="run-progress">
      <label for="run-progress-bar">Progress{pct === undefined ? '' : `: ${pct}%`}</label>
      {pct === undefined ? (
        <progress id="run-progress-bar" aria-valuetext={running ? 'no progress reported yet' : 'none reported'} />
      ) : (
        <progress id="run-progress-bar" max={100} value={pct} aria-valuetext={`${pct}%${progress?.message ? `, ${progress.message}` : ''}`} />
      )}
      <p class="hint" aria-live="polite">
        {progress?.message ?? (running ? 'No progress reported yet.' : '')}
      </p>
    </div>
  );
}
