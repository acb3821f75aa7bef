import type { JobResult, JsonObject } from '../../../sdk/client/index.js';
import '../styles/outputs.css';
import { client } from '../lib/gateway.js';
import { useAsync } from '../lib/use-async.js';
import { OutputCard } from './output-card.js';
import { outputFiles, runSubject, viewerFor, type OutputFile } from './output-file.js';

/** Headings of the maps a texture run makes, by file name. */
const MAP_TITLES: Record<string, string> = {
  'albedo.png': 'Albedo (base colour) map',
  'normal.png': 'Normal map',
  'roughness.png': 'Roughness map',
};

/**
 * What a succeeded run made: each file shown by its type (image, 3D mesh, audio, video, text),
 * with its facts, a download link and the kinds it can be sent to next. Several images (a
 * texture run's maps) are laid out as a labelled grid. Files are read from the gateway's origin.
 */
export function RunOutputs({ run, input }: { run: JobResult; input?: JsonObject }) {
  const files = outputFiles(run);
  // For "Use as input": which kinds take which files. Without it the files still show.
  const caps = useAsync(() => client().capabilities(), []);
  // The prompt the run was given (GET ?include=input) names what its files show, in alt text and labels.
  const subject = runSubject(run, input);
  const images = files.filter((f) => viewerFor(f) === 'image');
  const grid = images.length > 1;
  const rest = grid ? files.filter((f) => !images.includes(f)) : files;
  const card = (f: OutputFile, level: 3 | 4) => (
    <OutputCard key={f.url} run={run} file={f} caps={caps.data ?? null} title={MAP_TITLES[f.name] ?? f.name} subject={subject} level={level} index={files.indexOf(f)} />
  );

  return (
    <section aria-labelledby="outputs-heading" class="outputs">
      <h2 id="outputs-heading">Outputs</h2>
      {files.length === 0 ? <p class="muted">This run made no files.</p> : null}
      {grid ? (
        <section aria-labelledby="outputs-images-heading" class="output-images">
          <h3 id="outputs-images-heading">{run.kind === 'inference:texture:generate' ? 'Texture maps' : 'Images'}</h3>
          <div class="image-grid">{images.map((f) => card(f, 4))}</div>
        </section>
      ) : null}
      <div class="output-list">{rest.map((f) => card(f, 3))}</div>
    </section>
  );
}
