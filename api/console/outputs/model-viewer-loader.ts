/**
 * @google/model-viewer, loaded the first time a mesh is shown (it is large, and most runs make
 * none), from the copy the gateway serves (the page's `switchyard-model-viewer` meta).
 *
 * By default the viewer fetches its decoders for compressed meshes (Draco, KTX2/Basis) and its
 * Lottie loader from Google's and jsDelivr's CDNs, which the page must never ask anything of. Its
 * settings are read from `self.ModelViewerElement` when each element is made, so they are set
 * before the module loads: every location points at the gateway's own vendor folder, where no
 * decoder is served (a compressed mesh fails to show and keeps its download link; none of the
 * engines makes one). The meshopt decoder is left unset: then the viewer never fetches one.
 */

let loading: Promise<void> | null = null;

/** The vendored script's URL, from the page's meta (absolute: resolved against the document). */
function viewerScriptUrl(): string {
  const href = document.querySelector('meta[name="switchyard-model-viewer"]')?.getAttribute('content');
  if (!href) throw new Error('this page names no 3D viewer');
  return new URL(href, document.baseURI).href;
}

export function loadModelViewer(): Promise<void> {
  if (loading) return loading;
  loading = (async () => {
    const script = viewerScriptUrl();
    const noDecoders = new URL('./decoders-not-served/', script).href;
    const settings = ((self as unknown as { ModelViewerElement?: Record<string, string> }).ModelViewerElement ??= {});
    settings.dracoDecoderLocation = noDecoders;
    settings.ktx2TranscoderLocation = noDecoders;
    settings.lottieLoaderLocation = `${noDecoders}LottieLoader.js`;
    await import(/* the URL is only known at run time: esbuild leaves it to the browser */ script);
    await customElements.whenDefined('model-viewer');
  })();
  loading.catch(() => {
    loading = null;
  });
  return loading;
}
