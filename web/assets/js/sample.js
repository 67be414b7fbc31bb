// The sample data offer of the empty conversation view: one click adds
// datachat's sample dataset (a year of a made-up bike shop's sales) and its
// guide to the open conversation — creating one if none is open — through
// POST /api/conversations/{id}/sample, and the data panel shows them as it
// shows an upload. A second click in the same conversation adds nothing and
// the server says so.

import { h, icon, clear, append } from './dom.js';

/**
 * wireSample puts the sample button into the empty view (#empty).
 * @param {import('./panel.js').DataPanel} panel the data panel: its api, ensureConversation and load
 */
export function wireSample(panel) {
  const empty = document.getElementById('empty');
  if (!empty) return;
  const status = h('p.sample-status', { role: 'status', testid: 'sample-status' });
  const button = h('button.btn.sample-button', { type: 'button', testid: 'sample-button' }, icon('table', 16), h('span', null, 'Try it with sample data'));
  const box = h('div.sample', null,
    h('div.sample-row', null, button, h('span.muted.sample-what', null, 'A year of a made-up bike shop’s sales, and a guide to them.')),
    status);
  const suggestions = empty.querySelector('.suggestions');
  if (suggestions) suggestions.before(box);
  else empty.append(box);

  let addedTo = null; // the conversation the status speaks of
  const say = (text, kind = '') => {
    clear(status);
    status.className = `sample-status ${kind}`;
    if (text) append(status, [kind === 'error' ? icon('alert', 15) : null, h('span', null, text)]);
  };
  // The data panel renders again whenever another conversation opens: the
  // status then no longer applies.
  const list = document.getElementById('dataset-list');
  if (list) new MutationObserver(() => { if (addedTo && panel.convId !== addedTo) { addedTo = null; say(''); } }).observe(list, { childList: true });

  button.addEventListener('click', async () => {
    button.disabled = true;
    say('Adding the sample data…', 'busy');
    try {
      const id = await panel.ensureConversation();
      const res = await panel.api.post(`/api/conversations/${encodeURIComponent(id)}/sample`, {});
      if (panel.convId === id) await panel.load(id);
      addedTo = id;
      say(res && res.message ? res.message : 'Added the sample data.', 'ok');
    } catch (err) {
      say(err && err.message ? err.message : 'The sample data could not be added. Try again.', 'error');
    } finally {
      button.disabled = false;
    }
  });
}
