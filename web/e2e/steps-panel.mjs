// Browser steps of issue 24's data panel and sidebar: every format the
// server reads is taken by drop and picker (an .xlsx of three sheets dropped
// on the page shows its three tables at once), the Data badge counts
// attached databases, the Databases section sits under the datasets, "New
// conversation" leaves no trail of empty entries, a question over the
// limit is refused before it is stored, the composer's placeholder fits a
// phone, upload errors name the file once, and conversations are searched
// and exported as Markdown.
//
// Environment: DATACHAT_E2E_XLSX, a workbook of three sheets (animals,
// keepers, feedings), made by cmd/datachat's TestBrowser.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * panelSteps runs the steps on the data steps' page, and leaves that page
 * where it found it: on the conversation that was open, at desktop width.
 * @param {object} t what run.mjs lends: step, skip, expect, page() (the data
 *   steps' page), checkText, shot, quietly, TIMEOUT, PHONE, Q_SQL
 */
export async function panelSteps(t) {
  const { step, skip, expect, checkText, shot, quietly, TIMEOUT, PHONE, Q_SQL } = t;
  const page = t.page();
  const byTestId = (id) => page.getByTestId(id);
  const XLSX = process.env.DATACHAT_E2E_XLSX || '';
  const active = () => page.locator('[data-testid="conversation-item"].active').getAttribute('data-id');
  const items = () => page.locator('#conversation-list [data-testid="conversation-item"]').count();
  const keep = await active();

  /** drop drags files onto the page (the chat area, not a drop zone), as a person drops them. */
  const drop = async (files) => {
    await page.evaluate((list) => {
      const dt = new DataTransfer();
      for (const f of list) dt.items.add(new File([Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0))], f.name, { type: f.type }));
      const target = document.getElementById('messages');
      for (const type of ['dragenter', 'dragover', 'drop']) target.dispatchEvent(new DragEvent(type, { bubbles: true, cancelable: true, dataTransfer: dt }));
    }, files.map((f) => ({ name: f.name, type: f.type || '', b64: Buffer.from(f.data).toString('base64') })));
  };

  if (!XLSX || !fs.existsSync(XLSX)) {
    skip('an .xlsx of three sheets dropped on the page shows three tables at once', 'DATACHAT_E2E_XLSX is not set');
  } else {
    await step('the pickers take every format GET /api/formats lists; an .xlsx of three sheets dropped on the page shows its three tables at once, and a JSON file its table', async () => {
      const formats = await page.evaluate(async () => (await fetch('/api/formats')).json());
      await byTestId('new-conversation').click();
      await page.waitForFunction((id) => {
        const a = document.querySelector('[data-testid="conversation-item"].active');
        return a && a.dataset.id !== id;
      }, keep, { timeout: TIMEOUT });
      const dsAccept = (await byTestId('dataset-upload').getAttribute('accept')) || '';
      const docAccept = (await byTestId('document-upload').getAttribute('accept')) || '';
      for (const f of formats.datasets.formats) for (const e of f.extensions) expect(dsAccept.split(',').includes(e), `the dataset picker's accept ${JSON.stringify(dsAccept)} lacks ${e} (${f.name})`);
      for (const f of formats.documents.formats) for (const e of f.extensions) expect(docAccept.split(',').includes(e), `the document picker's accept ${JSON.stringify(docAccept)} lacks ${e} (${f.name})`);
      expect(dsAccept.includes('.xlsx') && dsAccept.includes('.json'), `the dataset picker hides Excel or JSON: ${dsAccept}`);

      await drop([{ name: 'zoo.xlsx', type: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet', data: fs.readFileSync(XLSX) }]);
      await page.waitForFunction(() => document.querySelectorAll('[data-testid="dataset-item"]').length === 3, null, { timeout: TIMEOUT });
      const names = await byTestId('dataset-item').evaluateAll((els) => els.map((e) => e.dataset.name));
      for (const sheet of ['animals', 'keepers', 'feedings']) expect(names.some((n) => n.includes(sheet)), `no table of sheet ${sheet} among ${JSON.stringify(names)}`);
      const status = await page.locator('#dataset-status').textContent();
      expect(/Added 3 tables/.test(status), `the status says ${JSON.stringify(status)}`);
      const badge = await page.locator('#data-count').textContent();
      expect(badge === '3', `the Data badge says ${JSON.stringify(badge)} with three tables`);

      const json = JSON.stringify([{ city: 'Oslo', visitors: 1200 }, { city: 'Lima', visitors: 800 }]);
      await drop([{ name: 'visits.json', type: 'application/json', data: Buffer.from(json) }]);
      await page.locator('[data-testid="dataset-item"][data-name="visits"]').waitFor({ timeout: TIMEOUT });
      await checkText(page, 'datasets from a workbook and a JSON file');
      await shot('24-xlsx-tables');
    });
  }

  await step('"New conversation" clicked again and again leaves one empty entry, and reuses it from another conversation', async () => {
    // The open conversation holds data (or a conversation's answers): the first click makes a fresh one.
    const before = await items();
    await byTestId('new-conversation').click();
    await page.waitForFunction((n) => document.querySelectorAll('#conversation-list [data-testid="conversation-item"]').length === n + 1, before, { timeout: TIMEOUT });
    const fresh = await active();
    for (let i = 0; i < 3; i++) await byTestId('new-conversation').click();
    await page.waitForFunction(() => document.activeElement && document.activeElement.id === 'chat-input', null, { timeout: TIMEOUT });
    expect(await items() === before + 1, `four clicks made ${(await items()) - before} conversations, want one`);
    expect(await active() === fresh, 'a click left the empty conversation');
    // From a conversation with data, New opens the empty one again.
    await page.locator(`#conversation-list [data-testid="conversation-item"][data-id="${keep}"] .conv-open`).click();
    await page.locator(`#conversation-list [data-testid="conversation-item"].active[data-id="${keep}"]`).waitFor();
    await byTestId('new-conversation').click();
    await page.locator(`#conversation-list [data-testid="conversation-item"].active[data-id="${fresh}"]`).waitFor();
    expect(await items() === before + 1, `New from another conversation made a second empty one (${(await items()) - before})`);
  });

  await step('a question over the chat’s limit is refused before sending, saying the limit; nothing is stored or made the title', async () => {
    const formats = await page.evaluate(async () => (await fetch('/api/formats')).json());
    const limit = formats.question.max_chars;
    expect(limit > 0, `GET /api/formats says no question limit: ${JSON.stringify(formats.question)}`);
    const conv = await active();
    const long = `${'How many visitors came? '.repeat(Math.ceil((limit + 500) / 24)).slice(0, limit + 499)}!`;
    const input = byTestId('chat-input');
    await input.fill(long);
    await input.press('Enter');
    const note = byTestId('composer-length');
    await note.filter({ hasText: `at most ${limit.toLocaleString('en-US')} characters` }).waitFor({ timeout: TIMEOUT });
    expect((await note.textContent()).includes(`${(limit + 500).toLocaleString('en-US')} / ${limit.toLocaleString('en-US')}`), `the note says ${JSON.stringify(await note.textContent())}`);
    expect(await byTestId('message-user').count() === 0, 'the long question was sent');
    expect((await input.inputValue()).length === limit + 500, 'the long question was taken from the composer');
    const stored = await page.evaluate(async (id) => (await fetch(`/api/conversations/${id}`)).json(), conv);
    expect(stored.messages.length === 0 && stored.title === 'New conversation', `the refused question was stored (${stored.messages.length} messages, title ${JSON.stringify(stored.title)})`);
    await checkText(page, 'a question over the limit');
    await shot('24-too-long');
    await input.fill('');
    await note.waitFor({ state: 'hidden' });
  });

  await step('on a phone the composer’s placeholder fits on its line and the sidebar’s search box fits', async () => {
    await page.setViewportSize(PHONE);
    const fit = async () => page.evaluate(() => {
      const input = document.getElementById('chat-input');
      const cs = getComputedStyle(input);
      const ctx = document.createElement('canvas').getContext('2d');
      ctx.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
      return { text: input.placeholder, width: ctx.measureText(input.placeholder).width, room: input.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) };
    });
    await page.waitForFunction(() => {
      const input = document.getElementById('chat-input');
      return input.clientWidth > 0 && input.clientWidth < 390;
    }, null, { timeout: TIMEOUT });
    // The layout settles after the resize (the composer's row is laid out
    // again): wait for the placeholder to fit, as a person sees the page
    // once it has; if it never does, the check below says by how much.
    await page.waitForFunction(() => {
      const input = document.getElementById('chat-input');
      const cs = getComputedStyle(input);
      const ctx = document.createElement('canvas').getContext('2d');
      ctx.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
      return ctx.measureText(input.placeholder).width <= input.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    }, null, { timeout: TIMEOUT }).catch(() => {});
    let f = await fit();
    expect(f.text && f.width <= f.room, `the placeholder ${JSON.stringify(f.text)} is ${Math.round(f.width)} px wide in ${Math.round(f.room)} px: it is cut`);
    await byTestId('sql-mode').click();
    f = await fit();
    expect(f.text.startsWith('SELECT') && f.width <= f.room, `the SQL placeholder ${JSON.stringify(f.text)} is ${Math.round(f.width)} px wide in ${Math.round(f.room)} px`);
    await byTestId('sql-mode').click();
    // The closed drawers wait off screen by design: the chat column itself must fit.
    const wide = await page.evaluate(() => [...document.querySelectorAll('.topbar *, #empty *, #composer *')]
      .filter((el) => el.getClientRects().length && el.getBoundingClientRect().right > window.innerWidth + 1)
      .map((el) => `${el.tagName.toLowerCase()}.${[...el.classList].join('.')}`).slice(0, 4));
    expect(!wide.length, `on a phone these stick out of the screen: ${wide.join(', ')}`);
    await shot('24-phone-empty');
    await page.locator('#open-sidebar').click();
    const box = byTestId('conversation-search');
    await box.waitFor({ state: 'visible' });
    await page.waitForFunction(() => {
      const r = document.querySelector('[data-testid="conversation-search"]').getBoundingClientRect();
      return r.left >= 0 && r.right <= window.innerWidth;
    }, null, { timeout: TIMEOUT });
    await shot('24-phone-search');
    await page.keyboard.press('Escape');
    await page.setViewportSize({ width: 1440, height: 900 });
  });

  await step('an upload error names the file once', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'datachat-e2e-')), 'empty.csv');
    fs.writeFileSync(file, '');
    await quietly(async () => {
      await byTestId('dataset-upload').setInputFiles(file);
      await page.locator('#dataset-status.error').filter({ hasText: 'empty' }).waitFor({ timeout: TIMEOUT });
    });
    const msg = await page.locator('#dataset-status').textContent();
    expect(msg.split('empty.csv').length === 2, `the message names the file ${msg.split('empty.csv').length - 1} times: ${JSON.stringify(msg)}`);
  });

  await step('a link to a document pasted in the dataset URL field says to add it as a file', async () => {
    await byTestId('dataset-url-input').fill('http://127.0.0.1:9/reports/Annual%20report.pdf');
    await byTestId('dataset-url-submit').click();
    await page.locator('#dataset-status.error').filter({ hasText: 'Annual report.pdf is a document' }).waitFor({ timeout: TIMEOUT });
    await byTestId('dataset-url-input').fill('');
  });

  await step('the Data badge counts attached databases too, and the Databases section sits right under the datasets', async () => {
    await page.locator(`#conversation-list [data-testid="conversation-item"][data-id="${keep}"] .conv-open`).click();
    await page.locator(`#conversation-list [data-testid="conversation-item"].active[data-id="${keep}"]`).waitFor();
    await byTestId('dataset-item').first().waitFor();
    // Lists and badge settle as the panel's requests come back.
    const counts = () => page.evaluate(() => ({
      datasets: document.querySelectorAll('[data-testid="dataset-item"]').length,
      documents: document.querySelectorAll('[data-testid="document-item"]').length,
      sources: document.querySelectorAll('[data-testid="source-item"][data-attached="true"]').length,
      badge: document.getElementById('data-count').textContent,
    }));
    await page.waitForFunction(() => {
      const n = document.querySelectorAll('[data-testid="dataset-item"], [data-testid="document-item"], [data-testid="source-item"][data-attached="true"]').length;
      return document.getElementById('data-count').textContent === String(n);
    }, null, { timeout: TIMEOUT }).catch(() => {});
    const c = await counts();
    expect(c.badge === String(c.datasets + c.documents + c.sources), `the Data badge says ${JSON.stringify(c.badge)} for ${c.datasets} datasets, ${c.documents} documents and ${c.sources} attached databases`);
    const order = await page.evaluate(() => {
      const src = document.getElementById('source-section');
      const ds = document.getElementById('dataset-list').closest('section');
      const notes = document.getElementById('notes-box');
      return { afterDatasets: ds.nextElementSibling === src, beforeNotes: !!(src.compareDocumentPosition(notes) & Node.DOCUMENT_POSITION_FOLLOWING) };
    });
    expect(order.afterDatasets && order.beforeNotes, `the Databases section is not right under the datasets: ${JSON.stringify(order)}`);
  });

  await step('the sidebar’s search finds conversations by message text and title, marks the match, and clears with Escape', async () => {
    const word = (Q_SQL.match(/[A-Za-z]{6,}/) || ['rows'])[0];
    const box = byTestId('conversation-search');
    await box.fill(word.toUpperCase());
    const hit = page.locator(`[data-testid="search-result"][data-id="${keep}"]`);
    await hit.waitFor({ timeout: TIMEOUT });
    expect(await page.locator('#conversation-list').isHidden(), 'the list stays beside the results');
    const marks = await hit.locator('mark').allTextContents();
    expect(marks.some((m) => m.toLowerCase() === word.toLowerCase()), `the result marks ${JSON.stringify(marks)}, not ${word}`);
    await checkText(page, 'search results');
    await shot('24-search');
    await box.fill('zzqx no such words');
    await byTestId('search-empty').waitFor({ timeout: TIMEOUT });
    await box.press('Escape');
    await page.locator('#conversation-list').waitFor({ state: 'visible' });
    expect(await box.inputValue() === '', 'Escape left the search');
    const title = (await page.locator(`#conversation-list [data-testid="conversation-item"][data-id="${keep}"] .conv-title-text`).textContent()).trim();
    await box.fill(title.slice(0, Math.min(12, title.length)));
    await page.locator(`[data-testid="search-result"][data-id="${keep}"]`).waitFor({ timeout: TIMEOUT });
    await hit.locator('.conv-open').click();
    await box.press('Escape');
  });

  await step('Export downloads the conversation as Markdown with its questions, SQL and results', async () => {
    await page.locator(`#conversation-list [data-testid="conversation-item"].active[data-id="${keep}"]`).waitFor();
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: TIMEOUT }), byTestId('export-button').click()]);
    const name = download.suggestedFilename();
    expect(/^[a-z0-9_-]+\.md$/.test(name), `the file is named ${JSON.stringify(name)}`);
    const text = fs.readFileSync(await download.path(), 'utf8');
    const title = (await page.locator('#conv-title').textContent()).trim();
    for (const want of [`# ${title}\n`, `## You\n\n${Q_SQL}\n`, '## datachat\n', '```sql\n', '| --- |']) {
      expect(text.includes(want), `the export lacks ${JSON.stringify(want)}:\n${text.slice(0, 600)}`);
    }
    expect(!/\bundefined\b|\[object Object\]/.test(text), 'the export shows undefined or [object Object]');
  });
}
