import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { Link } from './components/common.js';
import { signOut, whenSignedOut } from './lib/gateway.js';
import { matchPath, navigate, useLocation } from './lib/router.js';
import { getSession } from './lib/session.js';
import { AccountPage } from './pages/account-page.js';
import { NotFoundPage } from './pages/not-found-page.js';
import { RunPage } from './pages/run-page.js';
import { RunsPage } from './pages/runs-page.js';
import { SignInPage } from './pages/sign-in-page.js';
import { TryPage } from './pages/try-page.js';

/** The console's pages by path: each path is a deep link the gateway serves (api/http/routes/console.ts). */
const ROUTES: Array<{ pattern: string; title: (p: Record<string, string>) => string; render: (p: Record<string, string>) => ComponentChildren }> = [
  { pattern: '/', title: () => 'Try a kind', render: () => <TryPage /> },
  { pattern: '/kinds/:kind', title: (p) => `Try ${p.kind}`, render: (p) => <TryPage kind={p.kind} /> },
  { pattern: '/runs', title: () => 'Runs', render: () => <RunsPage /> },
  { pattern: '/runs/:run_id', title: (p) => `Run ${p.run_id}`, render: (p) => <RunPage runId={p.run_id} /> },
  { pattern: '/account', title: () => 'Account', render: () => <AccountPage /> },
];

const NAV = [
  { to: '/', label: 'Try', active: (path: string) => path === '/' || path.startsWith('/kinds/') },
  { to: '/runs', label: 'Runs', active: (path: string) => path.startsWith('/runs') },
  { to: '/account', label: 'Account', active: (path: string) => path === '/account' },
];

export function App() {
  const { path, query } = useLocation();
  const [signedIn, setSignedIn] = useState(() => getSession() !== null);

  useEffect(() => {
    whenSignedOut(() => {
      setSignedIn(false);
      const here = location.pathname.replace(new URL(document.baseURI).pathname.replace(/\/+$/, ''), '') || '/';
      navigate(here.startsWith('/sign-in') ? '/sign-in' : `/sign-in?next=${encodeURIComponent(here)}`, { replace: true });
    });
  }, []);

  const route = ROUTES.map((r) => ({ r, params: matchPath(r.pattern, path) })).find((m) => m.params);
  const needsSignIn = !signedIn || path === '/sign-in';
  const title = needsSignIn ? 'Sign in' : route ? route.r.title(route.params!) : 'Not found';

  // A new page: its title, and focus on its heading, so a screen reader announces where it is.
  // Not on the first load: there the focus starts at the top, where the skip link is.
  const loaded = useRef(false);
  useEffect(() => {
    document.title = `${title} · Switchyard`;
    if (!loaded.current) {
      loaded.current = true;
      return;
    }
    document.querySelector<HTMLElement>('[data-page-title]')?.focus({ preventScroll: true });
  }, [path, signedIn]);

  useEffect(() => {
    // Signed out on a console page: keep where the user was headed.
    if (!signedIn && path !== '/sign-in') navigate(`/sign-in?next=${encodeURIComponent(path + location.search)}`, { replace: true });
  }, [signedIn, path]);

  return (
    <>
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      <header class="top-bar">
        <Link to="/" class="brand">
          <span aria-hidden="true" class="brand-mark" />
          Switchyard
        </Link>
        {signedIn ? (
          <nav aria-label="Console">
            <ul>
              {NAV.map((n) => (
                <li key={n.to}>
                  <Link to={n.to} aria-current={n.active(path) ? 'page' : undefined}>
                    {n.label}
                  </Link>
                </li>
              ))}
            </ul>
          </nav>
        ) : null}
        {signedIn ? (
          <button type="button" class="button-quiet sign-out" onClick={() => void signOut()}>
            Sign out
          </button>
        ) : null}
      </header>
      <main id="main">
        {needsSignIn ? (
          <SignInPage next={query.get('next') ?? '/'} onSignedIn={() => setSignedIn(true)} />
        ) : route ? (
          route.r.render(route.params!)
        ) : (
          <NotFoundPage />
        )}
      </main>
    </>
  );
}
