// What sign-in reads and checks before anything reaches the server (DOM-free,
// unit-tested in e2e/unit): the address's fragment (#key=, #invite=,
// #signin-error=), the password rule, and where a key is kept.

/** The password rule the server enforces (POST /api/auth/invite). */
export const PASSWORD_MIN = 12;
export const PASSWORD_MAX_BYTES = 1024;
export const PASSWORD_RULE = `At least ${PASSWORD_MIN} characters.`;

/** Where the browser keeps an API key (all tabs of this browser share it). */
export const KEY_STORAGE = 'datachat.key';

/**
 * readFragment splits the address's fragment into what sign-in uses and the
 * rest (the page's own state, e.g. c=ID), which it gives back as a fragment
 * string without the leading '#'. Values are trimmed; empty ones are absent.
 *
 * @param {string} hash location.hash, with or without its '#'
 * @returns {{key: string|null, invite: string|null, signinError: string|null, rest: string}}
 */
export function readFragment(hash) {
  const params = new URLSearchParams(String(hash || '').replace(/^#/, ''));
  const take = (name) => {
    const v = params.get(name);
    params.delete(name);
    const t = v === null ? '' : v.trim();
    return t || null;
  };
  const key = take('key');
  const invite = take('invite');
  const signinError = take('signin-error');
  return { key, invite, signinError, rest: params.toString() };
}

/**
 * passwordProblem says what is wrong with a new password typed twice, in the
 * words the form shows, or '' when it may be sent. Characters are counted as
 * the server counts them (code points), bytes as UTF-8.
 */
export function passwordProblem(password, again) {
  const pw = String(password ?? '');
  if (!pw) return 'Enter a password.';
  const n = [...pw].length;
  if (n < PASSWORD_MIN) return `The password needs at least ${PASSWORD_MIN} characters; this one has ${n}.`;
  if (new TextEncoder().encode(pw).length > PASSWORD_MAX_BYTES) return `The password is too long: at most ${PASSWORD_MAX_BYTES.toLocaleString('en-US')} bytes.`;
  if (pw !== String(again ?? '')) return 'The two passwords differ. Type the same password twice.';
  return '';
}

/**
 * loadKey returns the API key kept for this browser: localStorage, or a key
 * an older page kept in sessionStorage (moved to localStorage). Storage that
 * throws (disabled, private mode) keeps nothing.
 */
export function loadKey(local, session) {
  try {
    const k = local && local.getItem(KEY_STORAGE);
    if (k) return k;
  } catch {
    /* storage disabled */
  }
  try {
    const old = session && session.getItem(KEY_STORAGE);
    if (old) {
      session.removeItem(KEY_STORAGE);
      saveKey(local, old);
      return old;
    }
  } catch {
    /* storage disabled */
  }
  return null;
}

/** saveKey keeps key for this browser; null forgets it. */
export function saveKey(local, key) {
  try {
    if (key) local.setItem(KEY_STORAGE, key);
    else local.removeItem(KEY_STORAGE);
  } catch {
    /* storage disabled: the key lives for this page only */
  }
}
