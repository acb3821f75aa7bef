import { useEffect, useRef, useState } from 'preact/hooks';
import { errorMessage, localUrl } from '../lib/gateway.js';
import { glbJson, glbStats, type GlbStats } from './glb-stats.js';
import { loadModelViewer } from './model-viewer-loader.js';
import type { OutputFile } from './output-file.js';

/**
 * A .glb in an interactive 3D view (drag or arrow keys to turn, scroll or pinch to zoom), with
 * its vertex and triangle counts and, for a rigged mesh, its skeleton. The file is fetched once:
 * its JSON chunk gives the counts, and the viewer reads the same bytes through a blob: URL.
 */
/**
 * The viewer's own stylesheet is a <style> element in its shadow root, which the page's CSP
 * (style-src 'self', nothing inline) refuses: unstyled, its poster, progress bar and prompt
 * spill below the view. The same text, adopted as a constructed stylesheet (CSSOM, which the
 * CSP leaves alone), styles it as its authors meant; it is the vendored file's own CSS.
 */
function adoptShadowStyles(viewer: HTMLElement): void {
  const root = viewer.shadowRoot;
  if (!root) return;
  const sheets = [...root.querySelectorAll('style')].map((el) => {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(el.textContent ?? '');
    return sheet;
  });
  root.adoptedStyleSheets = [...root.adoptedStyleSheets, ...sheets];
}

export function MeshViewer({ file, label }: { file: OutputFile; label: string }) {
  const host = useRef<HTMLDivElement>(null);
  const [stats, setStats] = useState<GlbStats | null>(null);
  const [state, setState] = useState<'loading' | 'ready' | Error>('loading');

  useEffect(() => {
    let blobUrl: string | null = null;
    let viewer: HTMLElement | null = null;
    let gone = false;
    (async () => {
      const res = await fetch(localUrl(file.url));
      if (!res.ok) throw new Error(`the gateway answered ${res.status} for ${file.name}`);
      const bytes = await res.arrayBuffer();
      if (gone) return;
      setStats(glbStats(glbJson(bytes)));
      await loadModelViewer();
      if (gone || !host.current) return;
      blobUrl = URL.createObjectURL(new Blob([bytes], { type: 'model/gltf-binary' }));
      viewer = document.createElement('model-viewer');
      viewer.setAttribute('alt', label);
      viewer.setAttribute('camera-controls', '');
      viewer.setAttribute('interaction-prompt', 'none');
      // The bytes are in memory already: read them now, not when the view scrolls into sight.
      viewer.setAttribute('loading', 'eager');
      viewer.className = 'mesh-view';
      // Empty stand-ins replace the viewer's own AR buttons, which sit in the tab order
      // (tabindex 2 and 3) even with AR off, one inside aria-hidden; and its progress bar:
      // the hint below says when the view is loading.
      for (const slot of ['ar-button', 'exit-webxr-ar-button', 'progress-bar']) {
        const stand = document.createElement('span');
        stand.slot = slot;
        stand.hidden = true;
        viewer.append(stand);
      }
      viewer.addEventListener('load', () => !gone && setState('ready'));
      viewer.addEventListener('error', () => !gone && setState(new Error(`the 3D view could not read ${file.name}`)));
      viewer.setAttribute('src', blobUrl);
      host.current.append(viewer);
      // Lit sets the shadow root's adopted sheets when the element connects: add ours after.
      await (viewer as HTMLElement & { updateComplete?: Promise<unknown> }).updateComplete;
      adoptShadowStyles(viewer);
    })().catch((err: unknown) => !gone && setState(err instanceof Error ? err : new Error(String(err))));
    return () => {
      gone = true;
      viewer?.remove();
      if (blobUrl) URL.revokeObjectURL(blobUrl);
    };
  }, [file.url, label]);

  return (
    <div class="mesh">
      <div ref={host} class="mesh-host" data-mesh-state={state instanceof Error ? 'error' : state} />
      <p class="hint" role="status">
        {state === 'loading' ? 'Loading the 3D view…' : state === 'ready' ? '3D view: drag or use the arrow keys to turn it, scroll or pinch to zoom.' : `No 3D view: ${errorMessage(state)}`}
      </p>
      {stats ? <MeshFacts stats={stats} /> : null}
    </div>
  );
}

function MeshFacts({ stats }: { stats: GlbStats }) {
  return (
    <div class="mesh-facts">
      <dl class="facts">
        <dt>Vertices</dt>
        <dd>{stats.vertices.toLocaleString()}</dd>
        <dt>Triangles</dt>
        <dd>{stats.triangles.toLocaleString()}</dd>
        {stats.bones > 0 ? (
          <>
            <dt>Bones</dt>
            <dd data-bone-count>{stats.bones}</dd>
          </>
        ) : null}
      </dl>
      {stats.bones > 0 ? (
        <details>
          <summary>Skeleton: {stats.bones} bones</summary>
          <ol class="bone-names">
            {stats.boneNames.map((n, i) => (
              <li key={i}>{n}</li>
            ))}
          </ol>
        </details>
      ) : null}
    </div>
  );
}
