// Browser steps of the semantic layer editor (issue 27): a metric and a
// synonym added on the page, saved, still there after a reload; a metric
// whose expression does not run refused beside its field, in words; the
// editor at phone width. run.mjs calls dictionarySteps once, after the
// dataset is uploaded and described.

const METRIC = 'rows_total';
const METRIC_DESC = 'Every row of the table (browser test).';
const TERM = 'records';
const BROKEN = 'broken_metric';

/**
 * dictionarySteps runs the steps on page, the open conversation holding
 * dataset table.
 * @param {object} o run.mjs's page and helpers
 */
export async function dictionarySteps({ page, step, expect, table, shot, quietly, noOverflow, checkText, phone, timeout }) {
  const editor = () => page.locator(`[data-testid="semantic-table"][data-name="${table}"]`);
  const open = async () => {
    const ed = editor();
    await ed.waitFor({ state: 'visible', timeout });
    if (!(await ed.locator('details.sem-details').evaluate((d) => d.open))) await ed.locator('summary.sem-summary').click();
    await ed.getByTestId('semantic-add-metric').waitFor();
    return ed;
  };

  await step(`a metric and a synonym added to ${table} on the page are saved, and are there after a reload`, async () => {
    const ed = await open();
    await ed.getByTestId('semantic-add-metric').click();
    const row = ed.getByTestId('metric-row').last();
    await row.getByTestId('metric-name').fill(METRIC);
    await row.getByTestId('metric-sql').fill('count(*)');
    await row.getByTestId('metric-description').fill(METRIC_DESC);
    await ed.getByTestId('semantic-add-synonym').click();
    const syn = ed.getByTestId('synonym-row').last();
    await syn.getByTestId('synonym-term').fill(TERM);
    await syn.getByTestId('synonym-meaning').fill(METRIC);
    expect(/unsaved/.test(await ed.locator('.sem-meta').textContent()), 'the table does not say it has unsaved changes');
    await ed.getByTestId('semantic-save').click();
    await ed.locator('.sem-status.ok').filter({ hasText: 'Saved' }).waitFor();
    const value = await ed.getByTestId('metric-value').first().textContent();
    expect(/^= \d[\d,]* now$/.test(value.trim()), `the saved metric shows ${JSON.stringify(value)}, not its value`);
    expect(/1 metric · 1 synonym/.test(await ed.locator('.sem-meta').textContent()), 'the table’s summary does not count the metric and the synonym');
    await shot('03c-semantic-saved');

    await page.reload({ waitUntil: 'domcontentloaded' });
    const again = await open();
    const names = await again.getByTestId('metric-name').evaluateAll((els) => els.map((e) => e.value));
    expect(names.includes(METRIC), `after a reload the metrics are ${JSON.stringify(names)}, without ${METRIC}`);
    const r = again.getByTestId('metric-row').filter({ has: page.locator(`[data-testid="metric-name"]`) }).nth(names.indexOf(METRIC));
    expect(await r.getByTestId('metric-sql').inputValue() === 'count(*)', 'after a reload the metric’s SQL is not count(*)');
    expect(await r.getByTestId('metric-description').inputValue() === METRIC_DESC, 'after a reload the metric’s description is lost');
    const terms = await again.getByTestId('synonym-term').evaluateAll((els) => els.map((e) => e.value));
    const meanings = await again.getByTestId('synonym-meaning').evaluateAll((els) => els.map((e) => e.value));
    expect(terms.includes(TERM) && meanings[terms.indexOf(TERM)] === METRIC, `after a reload the synonyms are ${JSON.stringify(terms)} → ${JSON.stringify(meanings)}`);
    await checkText(page, 'the semantic layer editor');
  });

  await step('a metric whose expression does not run is refused beside its field, saying why; nothing of it is stored', async () => {
    const ed = await open();
    await ed.getByTestId('semantic-add-metric').click();
    const row = ed.getByTestId('metric-row').last();
    await row.getByTestId('metric-name').fill(BROKEN);
    await row.getByTestId('metric-sql').fill('sum(no_such_column)');
    await quietly(async () => {
      await ed.getByTestId('semantic-save').click();
      await ed.locator('.sem-status.error').waitFor();
    });
    const bad = ed.getByTestId('metric-row').filter({ has: page.locator('[data-testid="field-error"]') });
    expect(await bad.count() === 1, `${await bad.count()} metric rows show an error, want the new one alone`);
    const msg = await bad.getByTestId('field-error').textContent();
    expect(/no_such_column/.test(msg) && /does not run/.test(msg), `the error beside the metric reads ${JSON.stringify(msg)}`);
    expect(await bad.getByTestId('metric-name').inputValue() === BROKEN, 'the error is not beside the metric it is about');
    expect(await bad.getByTestId('metric-sql').getAttribute('aria-invalid') === 'true', 'the expression’s field is not marked invalid');
    expect(await bad.getByTestId('metric-sql').inputValue() === 'sum(no_such_column)', 'the refused expression was not left to correct');
    await shot('03d-semantic-refused');
    await ed.getByTestId('semantic-cancel').click();
    await page.waitForFunction((n) => ![...document.querySelectorAll('[data-testid="metric-name"]')].some((e) => e.value === n), BROKEN, { timeout });
    const stored = await page.evaluate(async ({ t, n }) => {
      const conv = new URLSearchParams(location.hash.slice(1)).get('c');
      const res = await fetch(`/api/conversations/${encodeURIComponent(conv)}/dictionary/tables`, { headers: { Accept: 'application/json', ...(localStorage.getItem('datachat.key') ? { 'X-API-Key': localStorage.getItem('datachat.key') } : {}) } });
      const body = await res.json();
      const tb = (body.tables || []).find((x) => x.name === t);
      return { status: res.status, has: !!(tb && tb.metrics && tb.metrics[n]), kept: !!(tb && tb.metrics && tb.metrics.rows_total) };
    }, { t: table, n: BROKEN });
    expect(stored.status === 200 && !stored.has && stored.kept, `stored after the refusal: ${JSON.stringify(stored)}`);
  });

  await step('on a phone the semantic layer editor fits in the data drawer', async () => {
    await page.setViewportSize(phone);
    await page.locator('#open-data').click();
    const ed = await open();
    await ed.scrollIntoViewIfNeeded();
    await noOverflow(page, 'the data drawer with the semantic layer editor');
    const box = await ed.getByTestId('metric-sql').first().boundingBox();
    expect(box && box.x >= 0 && box.x + box.width <= phone.width, `a metric's SQL field is off screen (${JSON.stringify(box)})`);
    await shot('03e-semantic-phone');
    await page.keyboard.press('Escape');
    await page.setViewportSize({ width: 1440, height: 900 });
  });
}
