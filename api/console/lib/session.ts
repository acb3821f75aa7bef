/**
 * Who is signed in: an API key, kept in this tab's session storage only (never in a URL, a
 * cookie or local storage), so it is gone when the tab closes. A sign-in link's one-time code
 * is traded for a new key of the account (POST /v1/console/sign-in); that key's id is kept, so
 * signing out can revoke it.
 */

export interface Session {
  apiKey: string;
  /** Set when the key was minted by a sign-in link: signing out revokes it. */
  keyId?: string;
  accountId?: string;
}

const STORAGE_KEY = 'switchyard.console.session';

export function getSession(): Session | null {
  try {
    const raw = sessionStorage.getItem(STORAGE_KEY);
    return raw ? (JSON.parse(raw) as Session) : null;
  } catch {
    return null;
  }
}

export function setSession(s: Session): void {
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(s));
}

export function clearSession(): void {
  sessionStorage.removeItem(STORAGE_KEY);
}

/** The code of a sign-in link (`/sign-in#code=...`), or null. */
export function signInCodeOf(hash: string): string | null {
  return new URLSearchParams(hash.replace(/^#/, '')).get('code');
}
