import { useEffect, useState } from 'preact/hooks';
import { ErrorNote, PageTitle } from '../components/common.js';
import { redeemSignInCode, signInWithKey } from '../lib/gateway.js';
import { navigate } from '../lib/router.js';
import { signInCodeOf } from '../lib/session.js';

/**
 * Sign in: a sign-in link's one-time code (in the fragment, which no request carries) is
 * traded at once for a key; or an API key is pasted. Either way the key lands in the tab's
 * session storage and the address bar is cleaned of the code.
 */
export function SignInPage({ next, onSignedIn }: { next: string; onSignedIn: () => void }) {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [key, setKey] = useState('');
  const code = signInCodeOf(location.hash);

  const done = () => {
    onSignedIn();
    navigate(next && next.startsWith('/') && !next.startsWith('/sign-in') ? next : '/', { replace: true });
  };

  useEffect(() => {
    if (!code) return;
    // The code is spent whatever happens next: out of the address bar (and history) at once.
    history.replaceState(null, '', location.pathname + location.search);
    setBusy(true);
    redeemSignInCode(code).then(done, (err: unknown) => {
      setError(err);
      setBusy(false);
    });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  return (
    <section class="sign-in">
      <PageTitle>Sign in to Switchyard</PageTitle>
      {busy ? (
        <p role="status">Signing in with your link…</p>
      ) : (
        <form
          class="card stack"
          onSubmit={async (e) => {
            e.preventDefault();
            setBusy(true);
            setError(null);
            try {
              await signInWithKey(key.trim());
              done();
            } catch (err) {
              setError(err);
              setBusy(false);
            }
          }}
        >
          <p>
            Open the sign-in link <code>npm run dev</code> printed, or paste an API key of your account. The key stays in this tab only: it
            is forgotten when the tab closes.
          </p>
          <label for="api-key">API key</label>
          <input id="api-key" name="api-key" type="password" autoComplete="off" required placeholder="sy_…" value={key} onInput={(e) => setKey(e.currentTarget.value)} />
          <div>
            <button type="submit" class="button-primary" disabled={busy || !key.trim()}>
              Sign in
            </button>
          </div>
        </form>
      )}
      <ErrorNote error={error} title="Could not sign in" />
    </section>
  );
}
