// Export of the open conversation as Markdown: its questions, answers, the
// SQL each ran and the results, as the server writes them
// (GET /api/conversations/{id}/export.md), downloaded as a file.

import { h, icon } from './dom.js';

export class ExportButton {
  /**
   * @param {object} o
   * @param {() => import('./api.js').Api} o.api
   * @param {() => {id: string, title: string}|null} o.current the open conversation (null: none)
   * @param {(message: string, kind?: string) => void} o.toast
   */
  constructor({ api, current, toast }) {
    this.getApi = api;
    this.current = current;
    this.toast = toast;
    this.el = h('button.btn.ghost.topbar-btn', {
      id: 'export-button',
      type: 'button', testid: 'export-button', hidden: true,
      title: 'Download this conversation as Markdown, with its SQL and results', 'aria-label': 'Export as Markdown',
    }, icon('download', 18), h('span', null, 'Export'));
    this.el.addEventListener('click', () => this.download());
    document.getElementById('share-button').after(this.el);
  }

  /** update shows the button when a conversation of the user's own is open. */
  update() {
    this.el.hidden = !this.current();
  }

  async download() {
    const conv = this.current();
    if (!conv) return;
    this.el.disabled = true;
    try {
      const { blob, filename } = await this.getApi().file(`/api/conversations/${encodeURIComponent(conv.id)}/export.md`);
      const url = URL.createObjectURL(blob);
      const a = h('a', { href: url, download: filename || 'conversation.md', style: { display: 'none' } });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) {
      this.toast(err.message || 'The conversation could not be exported.', 'error');
    } finally {
      this.el.disabled = false;
    }
  }
}
