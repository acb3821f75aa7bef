import { useEffect, useState } from 'preact/hooks';
import { client } from '../lib/gateway.js';
import type { KindInfo, KindLoad } from './kind-info.js';

/** How often the live numbers (workers, queued jobs) are asked again. */
export const REFRESH_MS = 3000;

export interface LiveKinds {
  kinds: KindInfo[] | undefined;
  /** Queued jobs and model loads by kind, from GET /v1/network/capacity. */
  load: Map<string, KindLoad>;
  error: unknown;
}

/**
 * The kinds of GET /v1/capabilities and the fleet's load, asked again every REFRESH_MS while
 * the page shows them; a failed refresh keeps the last answer and shows the error.
 */
export function useLiveKinds(): LiveKinds {
  const [state, setState] = useState<LiveKinds>({ kinds: undefined, load: new Map(), error: undefined });
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const refresh = async () => {
      try {
        const [caps, capacity] = await Promise.all([client().capabilities(), client().capacity()]);
        if (!live) return;
        const load = new Map((capacity.by_kind as KindLoad[]).map((k) => [k.kind, k]));
        setState({ kinds: caps.kinds as KindInfo[], load, error: undefined });
      } catch (error) {
        if (live) setState((s) => ({ ...s, error }));
      }
      if (live) timer = setTimeout(() => void refresh(), REFRESH_MS);
    };
    void refresh();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, []);
  return state;
}
