// Browser steps for results as the page shows them (issue 24): charts drawn at
// once with a choice of kind, numbers that read as numbers and keep their
// column types after a reload, checked numbers explained on a tap, the whole
// query in the confirmation dialog, SQL that wraps clear of the copy icon, a
// failed card that keeps its database's name, downloads named after the
// question (CSV and XLSX), and a citation popover without a score.
//
// run.mjs calls resultSteps once, in the member's conversation, with what it
// shares: the step runner, the page and its helpers. The answers are scripted
// in llmfake-script.json ("Chart the penguins by species", "Ask my approval
// for the long report query").

import fs from 'node:fs';

const Q_CHART = 'Chart the penguins by species, please';
const Q_LONG_CONFIRM = 'Ask my approval for the long report query';
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1440, height: 900 };

/**
 * @param {object} t what run.mjs shares: step, expect, page (a getter),
 *   byTestId, lastAssistant, ask, waitTurnEnd, shot, painted, noOverflow, TIMEOUT,
 *   EXTRAS, DOC
 */
export async function resultSteps(t) {
  const { step, expect, ask, waitTurnEnd, shot, painted } = t;
  const page = () => t.page();
  const chartAnswer = () => page().getByTestId('message-assistant').filter({ has: page().locator('pre.sql', { hasText: 'avg_mass_g' }) }).last();
  const chartCard = () => chartAnswer().locator('[data-testid="sql-card"][data-state="ok"]').filter({ has: page().locator('pre.sql', { hasText: 'avg_mass_g' }) });
  const headerTypes = () => chartCard().locator('th .th-type').allTextContents();
  let liveTypes = [];

  await step('a result with a label column and numbers is charted at once; its kind switches (pie for a few parts) or it hides; a result with no numbers says it has no chart', async () => {
    await ask(Q_CHART);
    await waitTurnEnd();
    const card = chartCard();
    await card.waitFor();
    const view = card.getByTestId('chart');
    await view.waitFor();
    expect(await view.getAttribute('data-kind') === 'bar', `the species chart is a ${await view.getAttribute('data-kind')} chart, want bar`);
    await painted(page(), view.locator('canvas'));
    const kinds = await card.locator('[data-testid="chart-kinds"] button').evaluateAll((bs) => bs.map((b) => b.dataset.kind));
    expect(JSON.stringify(kinds) === JSON.stringify(['bar', 'line', 'area', 'scatter', 'pie']), `the chart offers the kinds ${JSON.stringify(kinds)}`);
    for (const k of ['line', 'area', 'scatter', 'pie']) {
      await card.locator(`[data-testid="chart-kinds"] button[data-kind="${k}"]`).click();
      await card.locator(`[data-testid="chart"][data-kind="${k}"]`).waitFor();
      await painted(page(), card.locator('[data-testid="chart"] canvas'));
    }
    const btn = card.getByTestId('chart-button');
    expect(await btn.getAttribute('aria-pressed') === 'true', 'the Chart button does not show the chart as shown');
    await btn.click();
    await card.locator('.chart-wrap').waitFor({ state: 'hidden' });
    expect(await btn.getAttribute('aria-pressed') === 'false', 'the Chart button still says the chart is shown');
    await btn.click();
    await painted(page(), card.locator('[data-testid="chart"] canvas'));
    const plain = chartAnswer().locator('[data-testid="sql-card"][data-state="ok"]').filter({ has: page().locator('pre.sql', { hasText: 'SELECT species, island' }) });
    await plain.waitFor();
    const none = plain.getByTestId('chart-none');
    expect(await none.isVisible() && /No chart: no number column/.test(await none.textContent()), `the result without numbers says ${JSON.stringify(await none.textContent().catch(() => ''))}`);
    expect(await plain.getByTestId('chart').count() === 0 && await plain.getByTestId('chart-button').count() === 0, 'a result without numbers offers a chart');
    await card.scrollIntoViewIfNeeded();
    await shot('30-chart-default');
  });

  await step('numbers read as numbers: thousands separators, aligned right, and the same column types after a reload', async () => {
    const card = chartCard();
    liveTypes = await headerTypes();
    expect(JSON.stringify(liveTypes) === JSON.stringify(['text', 'integer', 'float']), `the live result's column types are ${JSON.stringify(liveTypes)}`);
    const cells = await card.locator('tbody tr').first().locator('td').evaluateAll((tds) => tds.map((td) => ({ text: td.textContent, align: getComputedStyle(td).textAlign })));
    expect(cells[0].text === 'Adelie' && cells[1].text === '152' && cells[2].text === '3,701', `the first row reads ${JSON.stringify(cells.map((c) => c.text))}, want Adelie, 152, 3,701`);
    expect(cells[1].align === 'right' && cells[2].align === 'right' && cells[0].align !== 'right', `cells are aligned ${JSON.stringify(cells.map((c) => c.align))}`);
    await page().reload({ waitUntil: 'domcontentloaded' });
    await chartCard().waitFor();
    const reloaded = await headerTypes();
    expect(JSON.stringify(reloaded) === JSON.stringify(liveTypes), `after a reload the column types are ${JSON.stringify(reloaded)}, live they were ${JSON.stringify(liveTypes)}`);
    const again = await chartCard().locator('tbody tr').first().locator('td').allTextContents();
    expect(again[2] === '3,701', `after a reload the mean mass reads ${JSON.stringify(again[2])}`);
    await chartCard().getByTestId('chart').waitFor();
  });

  await step('on a phone, tapping a checked number explains it: a matched one its cell and query, an unmatched one to check it', async () => {
    const p = page();
    await p.setViewportSize(PHONE);
    const a = chartAnswer();
    const matched = a.locator('[data-testid="number-check"][data-status="matched"]').filter({ hasText: '152' }).first();
    await matched.scrollIntoViewIfNeeded();
    await matched.click();
    const box = a.getByTestId('number-explain');
    await box.waitFor();
    const text = await box.textContent();
    expect(/152/.test(text) && /row 1/.test(text) && /column n/.test(text) && /SELECT species/.test(text),
      `the matched number's explanation says ${JSON.stringify(text)}`);
    expect(await box.locator('pre.sql .tok-kw').count() > 0, 'the explanation does not show the query highlighted');
    await fits(box, expect, 'a number\'s explanation');
    await shot('31-number-explained-phone');
    const unmatched = a.locator('[data-testid="number-check"][data-status="unmatched"]').filter({ hasText: '4,321' }).first();
    await unmatched.click();
    await a.locator('[data-testid="number-explain"][data-status="unmatched"]').waitFor();
    const says = await a.getByTestId('number-explain').textContent();
    expect(/4,321/.test(says) && /not found in this answer’s query results — check it/.test(says), `the unmatched number's explanation says ${JSON.stringify(says)}`);
    expect(await a.getByTestId('number-explain').count() === 1, 'two explanations are open at once');
    await unmatched.click();
    await a.getByTestId('number-explain').waitFor({ state: 'detached' });
    await p.setViewportSize(DESKTOP);
  });

  await step('SQL wraps clear of the copy icon; a failed card keeps its database\'s name; CSV and XLSX are named after the question', async () => {
    const p = page();
    const card = chartCard();
    const clear = async () => card.locator('.sql-wrap').evaluate((wrap) => {
      const pre = wrap.querySelector('pre.sql');
      const btn = wrap.querySelector('.copy-sql').getBoundingClientRect();
      const range = document.createRange();
      range.selectNodeContents(pre);
      const under = [...range.getClientRects()].filter((r) => r.width > 0 && r.bottom > btn.top && r.top < btn.bottom && r.right > btn.left + 0.5);
      return { wide: pre.scrollWidth > pre.clientWidth + 1, under: under.length };
    });
    for (const size of [DESKTOP, PHONE]) {
      await p.setViewportSize(size);
      const c = await clear();
      expect(!c.wide && !c.under, `at ${size.width} px the SQL ${c.wide ? 'scrolls sideways' : `runs under the copy icon (${c.under} line boxes)`}`);
      const failed = chartAnswer().locator('[data-testid="sql-card"][data-state="failed"]').first();
      const src = failed.getByTestId('sql-source');
      await src.waitFor();
      const s = await src.evaluate((el) => ({ text: el.textContent, cut: el.scrollWidth > el.clientWidth + 1 }));
      expect(s.text === 'on warehouse' && !s.cut, `at ${size.width} px the failed card's database reads ${JSON.stringify(s.text)}${s.cut ? ', cut' : ''}`);
    }
    await failedShot(p, shot);
    await p.setViewportSize(DESKTOP);
    const [csv] = await Promise.all([p.waitForEvent('download'), card.getByTestId('csv-button').click()]);
    expect(csv.suggestedFilename() === 'chart-the-penguins-by-species-please.csv', `the CSV is named ${csv.suggestedFilename()}`);
    const [xlsx] = await Promise.all([p.waitForEvent('download'), card.getByTestId('xlsx-button').click()]);
    expect(xlsx.suggestedFilename() === 'chart-the-penguins-by-species-please.xlsx', `the XLSX is named ${xlsx.suggestedFilename()}`);
    const bytes = fs.readFileSync(await xlsx.path());
    expect(bytes.subarray(0, 2).toString() === 'PK' && bytes.includes('xl/worksheets/sheet1.xml') && bytes.includes('avg_mass_g'),
      'the XLSX is not a workbook holding the result');
  });

  await step('the confirmation dialog shows the whole query: wrapped, highlighted, scrollable, on a phone too', async () => {
    const p = page();
    await ask(Q_LONG_CONFIRM);
    const dlg = p.getByTestId('confirm-dialog');
    await dlg.waitFor({ state: 'visible' });
    const sql = dlg.getByTestId('confirm-sql');
    for (const size of [DESKTOP, PHONE]) {
      await p.setViewportSize(size);
      const m = await sql.evaluate((el) => {
        el.scrollTop = el.scrollHeight;
        const r = el.getBoundingClientRect();
        return {
          text: el.textContent, wide: el.scrollWidth > el.clientWidth + 1, scrolls: el.scrollHeight > el.clientHeight && getComputedStyle(el).overflowY === 'auto',
          kw: el.querySelectorAll('.tok-kw').length, right: r.right, inner: window.innerWidth, lines: Math.round(el.clientHeight / parseFloat(getComputedStyle(el).lineHeight)),
        };
      });
      expect(m.text.includes('end of the long report query') && m.text.includes('heavy_long_billed_females'), 'the dialog does not hold the whole query');
      expect(!m.wide, `at ${size.width} px the query scrolls sideways instead of wrapping`);
      expect(m.scrolls && m.lines >= 8, `at ${size.width} px the query shows ${m.lines} lines and ${m.scrolls ? 'scrolls' : 'does not scroll'}`);
      expect(m.kw > 0, 'the query is not highlighted');
      expect(m.right <= m.inner, `at ${size.width} px the query box reaches ${m.right} px`);
      await shot(`32-confirm-long-${size.width}`);
    }
    await p.setViewportSize(DESKTOP);
    await p.getByTestId('confirm-decline').click();
    await dlg.waitFor({ state: 'hidden' });
    await waitTurnEnd();
  });

  if (t.EXTRAS && t.DOC) {
    await step('the citation popover shows the page, not a retrieval score', async () => {
      const p = page();
      const cite = p.locator('button.cite').first();
      await cite.scrollIntoViewIfNeeded();
      await cite.click();
      const pop = p.locator('#popover');
      await pop.waitFor({ state: 'visible' });
      const text = await pop.locator('.pop-meta').textContent();
      expect(/Page \d+/.test(text) && !/score/i.test(text), `the popover's line under the document says ${JSON.stringify(text)}`);
      await p.keyboard.press('Escape');
      await pop.waitFor({ state: 'hidden' });
    });
  }
}

/** fits checks that an element and everything in it lie within the phone's width. */
async function fits(loc, expect, what) {
  const w = await loc.evaluate((el) => {
    const out = [];
    for (const e of [el, ...el.querySelectorAll('*')]) {
      const r = e.getBoundingClientRect();
      if (r.width > 0 && (r.right > window.innerWidth + 1 || r.left < -1)) out.push(`${e.tagName.toLowerCase()}.${[...e.classList].join('.')} (${Math.round(r.left)}–${Math.round(r.right)})`);
    }
    return { out: out.slice(0, 4), inner: window.innerWidth, wide: el.scrollWidth > el.clientWidth + 1 };
  });
  expect(!w.out.length && !w.wide, `${what} is wider than the phone (${w.inner} px): ${w.out.join(', ')}${w.wide ? ' (it scrolls sideways)' : ''}`);
}

async function failedShot(p, shot) {
  await p.locator('[data-testid="sql-card"][data-state="failed"]').first().scrollIntoViewIfNeeded();
  await shot('33-failed-card-phone');
}
