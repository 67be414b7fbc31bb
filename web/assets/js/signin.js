// The sign-in page: name and password (POST /api/auth/login), the single
// sign-on button when the server has it (GET /api/auth/methods), an API key
// for scripts' users and older installs, and the set-password form of an
// invite link (#invite=TOKEN, POST /api/auth/invite). Messages are text in
// #signin-error.

import { Api, ApiError } from './api.js';
import { passwordProblem, PASSWORD_RULE } from './auth.js';

const $ = (id) => document.getElementById(id);

/** sameOriginPath accepts a server-given link only as a path on this origin. */
export function sameOriginPath(p) {
  return typeof p === 'string' && p.startsWith('/') && !p.startsWith('//') && !p.startsWith('/\\') ? p : '';
}

export class SignIn {
  /**
   * @param {object} o
   * @param {(key: string) => void} o.onKey the key form was sent
   * @param {(me: object) => void} o.onSignedIn a password or an invite signed in (the cookie is set)
   */
  constructor({ onKey, onSignedIn }) {
    this.onKey = onKey;
    this.onSignedIn = onSignedIn;
    this.anon = new Api(null); // sign-in's own requests: a 401 here is an answer, not a sign-out
    this.methods = null;
    this.inviteToken = null;

    $('password-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.login();
    });
    $('signin-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const key = $('api-key-input').value.trim();
      if (!key) {
        this.message('Enter your API key.');
        $('api-key-input').focus();
        return;
      }
      this.onKey(key);
    });
    $('invite-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.useInvite();
    });
    $('invite-cancel').addEventListener('click', () => {
      this.inviteToken = null;
      this.show('');
    });
    $('password-rule').textContent = PASSWORD_RULE;
    for (const id of ['invite-password', 'invite-password-again']) {
      $(id).addEventListener('input', () => this.checkPasswords(false));
    }
  }

  /** message shows text under the heading ('' hides it); kind 'info' is not an error. */
  message(text, kind = 'error') {
    const el = $('signin-error');
    el.textContent = text || '';
    el.hidden = !text;
    el.classList.toggle('info', kind === 'info');
    el.setAttribute('role', kind === 'info' ? 'status' : 'alert');
  }

  busy(on) {
    for (const id of ['signin-submit', 'api-key-submit', 'invite-submit']) $(id).disabled = on;
  }

  /** show is the sign-in page with a message (the reason one was signed out, an error). */
  show(text, kind = 'error') {
    $('app').hidden = true;
    $('admin-view').hidden = true;
    $('signin').hidden = false;
    $('invite-form').hidden = true;
    $('password-form').hidden = false;
    $('signin-title').textContent = 'Sign in';
    this.message(text, kind);
    this.busy(false);
    $('signin-password').value = '';
    $('api-key-input').value = '';
    this.loadMethods();
    const name = $('signin-name');
    (name.value ? $('signin-password') : name).focus();
  }

  /** showInvite is the set-password form of an invite link. */
  showInvite(token) {
    this.inviteToken = token;
    $('app').hidden = true;
    $('admin-view').hidden = true;
    $('signin').hidden = false;
    $('password-form').hidden = true;
    $('sso-button').hidden = true;
    $('key-signin').hidden = true;
    $('invite-form').hidden = false;
    $('signin-title').textContent = 'Set your password';
    this.message('');
    this.busy(false);
    $('invite-password').value = '';
    $('invite-password-again').value = '';
    $('invite-password').focus();
  }

  /** loadMethods shows the forms the server offers: password, SSO, and always the key. */
  async loadMethods() {
    $('key-signin').hidden = false;
    if (!this.methods) {
      try {
        this.methods = await this.anon.get('/api/auth/methods');
      } catch (err) {
        // A server without accounts signs in with keys only.
        this.methods = err instanceof ApiError && err.status === 404 ? { password: false, oidc: false } : null;
      }
    }
    if (this.inviteToken) return;
    const m = this.methods || { password: true };
    const sso = m.oidc ? sameOriginPath(m.oidc_login) : '';
    $('sso-button').hidden = !sso;
    if (sso) $('sso-button').setAttribute('href', sso);
    const password = m.password !== false;
    $('password-form').hidden = !password;
    if (!password && !sso) $('key-signin').open = true;
  }

  async login() {
    const user = $('signin-name').value.trim();
    const password = $('signin-password').value;
    if (!user) {
      this.message('Enter your name.');
      $('signin-name').focus();
      return;
    }
    if (!password) {
      this.message('Enter your password.');
      $('signin-password').focus();
      return;
    }
    this.busy(true);
    try {
      const res = await this.anon.post('/api/auth/login', { user, password });
      this.message('');
      this.onSignedIn(res && res.user ? res.user : null);
    } catch (err) {
      this.message(err.message || 'Sign-in failed. Try again.');
      $('signin-password').value = '';
      $('signin-password').focus();
    } finally {
      this.busy(false);
    }
  }

  /** checkPasswords shows what is wrong with the new password; final: also an empty or unequal one. */
  checkPasswords(final) {
    const pw = $('invite-password').value;
    const again = $('invite-password-again').value;
    let problem = passwordProblem(pw, again);
    // While typing, say only what the first field lacks, once it has something.
    if (!final && (!pw || (problem.startsWith('The two') && again.length < pw.length))) problem = '';
    $('invite-password').setAttribute('aria-invalid', problem && !problem.startsWith('The two') ? 'true' : 'false');
    this.message(problem);
    return problem;
  }

  async useInvite() {
    if (this.checkPasswords(true)) return;
    this.busy(true);
    try {
      const res = await this.anon.post('/api/auth/invite', { token: this.inviteToken, password: $('invite-password').value });
      this.inviteToken = null;
      this.message('');
      this.onSignedIn(res && res.user ? res.user : null);
    } catch (err) {
      this.message(err.message || 'The password was not set. Try again.');
    } finally {
      this.busy(false);
    }
  }
}
