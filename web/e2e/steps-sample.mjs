// Browser steps of the sample data (issue 24): in an empty conversation one
// click adds datachat's sample table and its guide, which the data panel
// shows; a second click adds nothing and says so; a question about the
// sample gets an answer with its SQL card and chart. run.mjs calls
// sampleSteps once, signed in, with a conversation open; the steps leave
// that conversation open again.
//
// Environment:
//   DATACHAT_E2E_README_SHOT  a path: the finished answer is saved there as a
//                             PNG, the README's screenshot (docs/answer.png):
//     DATACHAT_E2E_README_SHOT=$PWD/docs/answer.png go test ./cmd/datachat -run TestBrowser -count=1

import fs from 'node:fs';
import path from 'node:path';

const SAMPLE_TABLE = 'sales';
const SAMPLE_DOC = 'sample-sales-guide.md';
const QUESTION = 'Which region had the most revenue in 2025?'; // scripted in llmfake-script.json
const README_SHOT = process.env.DATACHAT_E2E_README_SHOT ? path.resolve(process.env.DATACHAT_E2E_README_SHOT) : '';
const README_SHOT_MAX = 300 << 10; // bytes: the README's image stays small
const SHOT_SIZE = { width: 1280, height: 1120 }; // the question, the SQL card with its chart and table, and the answer
const PHONE = { width: 390, height: 844 };

/**
 * sampleSteps runs the steps with run.mjs's helpers.
 * @param {object} t
 * @param {import('playwright-core').Page} t.page the signed-in page
 * @param {(name: string, fn: () => Promise<void>) => Promise<void>} t.step
 * @param {(cond: any, msg: string) => void} t.expect
 * @param {(text: string) => Promise<void>} t.ask
 * @param {() => Promise<void>} t.waitTurnEnd
 * @param {(name: string) => Promise<string>} t.shot
 * @param {(p: import('playwright-core').Page, canvas: import('playwright-core').Locator) => Promise<void>} t.painted
 *   waits until a canvas has drawn something
 * @param {number} t.timeout ms to wait for each expectation
 */
export async function sampleSteps({ page, step, expect, ask, waitTurnEnd, shot, painted, timeout }) {
  const byTestId = (id) => page.getByTestId(id);
  const active = () => page.locator('[data-testid="conversation-item"].active').getAttribute('data-id', { timeout: 1000 }).catch(() => null);
  const sampleTable = () => byTestId('dataset-item').and(page.locator(`[data-name="${SAMPLE_TABLE}"]`));
  const sampleDoc = () => byTestId('document-item').filter({ hasText: SAMPLE_DOC });
  let keep = null;
  let sampleConv = null;

  await step('an empty conversation offers the sample data: one click adds the table and its guide to the data panel', async () => {
    keep = await active();
    await byTestId('new-conversation').click();
    await page.waitForFunction((id) => {
      const a = document.querySelector('[data-testid="conversation-item"].active');
      return a && a.dataset.id !== id;
    }, keep, { timeout });
    sampleConv = await active();
    const button = byTestId('sample-button');
    await button.waitFor({ state: 'visible' });
    expect(await byTestId('dataset-item').count() === 0, 'the new conversation already lists datasets');
    await button.click();
    await byTestId('sample-status').filter({ hasText: 'Added the sample data' }).waitFor({ timeout });
    await sampleTable().waitFor({ state: 'visible', timeout });
    await sampleDoc().waitFor({ state: 'visible', timeout });
    const meta = await sampleTable().locator('.item-meta').textContent();
    expect(/^\d{1,2},\d{3} rows · 10 columns/.test(meta.trim()), `the sample table's meta says ${JSON.stringify(meta)}, want a few thousand rows and 10 columns`);
    const status = await byTestId('sample-status').textContent();
    expect(status.includes(SAMPLE_TABLE) && status.includes(SAMPLE_DOC), `the status ${JSON.stringify(status)} does not name the table and the document`);
    expect(await active() === sampleConv, 'adding the sample opened another conversation');
    await shot('sample-01-added');
  });

  await step('a second click adds nothing and says the sample is already there', async () => {
    await byTestId('sample-button').click();
    await byTestId('sample-status').filter({ hasText: 'already in this conversation' }).waitFor({ timeout });
    expect(await sampleTable().count() === 1, `${await sampleTable().count()} sample tables listed, want 1`);
    expect(await sampleDoc().count() === 1, `${await sampleDoc().count()} sample guides listed, want 1`);
  });

  await step('on a phone the sample offer fits the screen', async () => {
    const size = page.viewportSize();
    await page.setViewportSize(PHONE);
    try {
      await byTestId('sample-button').waitFor({ state: 'visible' });
      // run.mjs's noOverflow counts the closed data drawer, which sits past
      // the right edge on purpose: measure the empty view and the page's scroll.
      await page.waitForFunction(() => document.getAnimations().every((a) => a.playState !== 'running'), null, { timeout }).catch(() => {});
      const wide = await page.locator('#empty').evaluate((empty) => {
        const out = [];
        for (const el of [empty, ...empty.querySelectorAll('*')]) {
          const r = el.getBoundingClientRect();
          if (r.width > 0 && (r.left < -1 || r.right > window.innerWidth + 1)) out.push(`${el.tagName.toLowerCase()}.${[...el.classList].join('.')} (${Math.round(r.left)}–${Math.round(r.right)})`);
        }
        if (document.documentElement.scrollWidth > window.innerWidth) out.push(`the page scrolls sideways (${document.documentElement.scrollWidth} px)`);
        return out;
      });
      expect(!wide.length, `the empty view with the sample offer is wider than the phone (${PHONE.width} px): ${wide.slice(0, 4).join(', ')}`);
      const box = await byTestId('sample-button').boundingBox();
      expect(box && box.x >= 0 && box.x + box.width <= PHONE.width, `the sample button is off screen (box ${JSON.stringify(box)})`);
      await shot('sample-02-phone');
    } finally {
      await page.setViewportSize(size);
    }
  });

  await step(`a question about the sample is answered with its SQL and a chart${README_SHOT ? ` (saved as ${README_SHOT})` : ''}`, async () => {
    const size = page.viewportSize();
    await page.setViewportSize(SHOT_SIZE);
    try {
      await ask(QUESTION);
      await waitTurnEnd();
      const answer = byTestId('message-assistant').last();
      expect(await answer.getAttribute('data-status') === 'complete', `the answer's status is ${await answer.getAttribute('data-status')}`);
      const card = answer.locator('[data-testid="sql-card"][data-state="ok"]').last();
      await card.waitFor();
      expect(/FROM sales/.test(await card.locator('pre.sql').textContent()), 'the card does not show the SQL over the sample table');
      expect(await card.locator('[data-testid="result-table"] tbody tr').count() === 4, 'the result does not list the four regions');
      await answer.locator('[data-testid="number-check"][data-status="matched"]').filter({ hasText: '275,784' }).first().waitFor();
      // The chart: drawn at once where the page charts by default, else one click.
      const canvas = card.locator('[data-testid="chart"] canvas');
      if (!(await canvas.isVisible())) await card.getByTestId('chart-button').click();
      await canvas.waitFor();
      await painted(page, canvas);
      // The question at the top, the answer and its card below it.
      await byTestId('message-user').last().evaluate((el) => el.scrollIntoView({ block: 'start' }));
      const file = await shot('sample-03-answer');
      if (README_SHOT) {
        fs.mkdirSync(path.dirname(README_SHOT), { recursive: true });
        await page.screenshot({ path: README_SHOT, fullPage: false });
        const bytes = fs.statSync(README_SHOT).size;
        expect(bytes < README_SHOT_MAX, `${README_SHOT} is ${bytes} bytes, want under ${README_SHOT_MAX} (see ${file})`);
      }
    } finally {
      await page.setViewportSize(size);
    }
  });

  await step('the conversation open before the sample steps is open again', async () => {
    if (!keep) return;
    await page.locator(`[data-testid="conversation-item"][data-id="${keep}"]`).click();
    await page.waitForFunction((id) => document.querySelector('[data-testid="conversation-item"].active')?.dataset.id === id, keep, { timeout });
    await byTestId('message-user').first().waitFor();
  });
}
