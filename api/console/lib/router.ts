import { useEffect, useState } from 'preact/hooks';

/**
 * The console's paths, under the page's <base> (PUBLIC_URL's path): the gateway answers each
 * with the same document, and this renders the page a path names. History API only: a path is
 * a deep link, and Back and Forward work.
 */

const base = new URL(document.baseURI).pathname.replace(/\/+$/, '');

/** The path below the base, from '/'. */
export function currentPath(): string {
  const p = location.pathname.startsWith(base) ? location.pathname.slice(base.length) : location.pathname;
  return p === '' ? '/' : p;
}

/** The href of a console path (what a link's href holds). */
export const href = (path: string): string => `${base}${path}`;

const listeners = new Set<() => void>();
window.addEventListener('popstate', () => listeners.forEach((l) => l()));

export function navigate(path: string, opts: { replace?: boolean } = {}): void {
  const url = href(path);
  if (opts.replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  listeners.forEach((l) => l());
}

/** The current path and query, re-rendering the caller on every navigation. */
export function useLocation(): { path: string; query: URLSearchParams } {
  const [, setTick] = useState(0);
  useEffect(() => {
    const l = () => setTick((t) => t + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return { path: currentPath(), query: new URLSearchParams(location.search) };
}

/** The parameters of `path` when it matches `pattern` ('/runs/:run_id'), else null. */
export function matchPath(pattern: string, path: string): Record<string, string> | null {
  const names: string[] = [];
  const re = new RegExp(`^${pattern.replace(/:([a-z_]+)/g, (_m, n: string) => (names.push(n), '([^/]+)'))}/?$`);
  const m = re.exec(path);
  if (!m) return null;
  return Object.fromEntries(names.map((n, i) => [n, decodeURIComponent(m[i + 1])]));
}

/** A click a link should handle itself: plain left click, no modifier (others open a tab as usual). */
export function isPlainClick(e: MouseEvent): boolean {
  return e.button === 0 && !e.metaKey && !e.ctrlKey && !e.shiftKey && !e.altKey && !e.defaultPrevented;
}
