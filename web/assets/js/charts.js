// Draws a picked chart (chartpick.js) with Chart.js, vendored under
// assets/vendor/ and loaded on first use so the page stays light.

export const CHART_JS_URL = '/assets/vendor/chart-4.6.1.umd.js';
const PALETTE = ['#2563eb', '#d97706', '#059669', '#db2777', '#7c3aed', '#0891b2', '#65a30d', '#dc2626'];

let loading = null;

/** loadChartJS loads the vendored UMD build once and resolves to window.Chart. */
export function loadChartJS() {
  if (window.Chart) return Promise.resolve(window.Chart);
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      const s = document.createElement('script');
      s.src = CHART_JS_URL;
      s.async = true;
      s.onload = () => {
        if (!window.Chart) {
          reject(new Error('Chart.js did not load.'));
          return;
        }
        window.Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
        window.Chart.defaults.color = '#4b5563';
        resolve(window.Chart);
      };
      s.onerror = () => {
        loading = null;
        reject(new Error('Could not load the charting library.'));
      };
      document.head.append(s);
    });
  }
  return loading;
}

/**
 * drawChart renders spec into canvas and returns the Chart instance (call
 * destroy() on it before drawing again). spec.kind is bar, line, area (a
 * filled line), scatter (points over the labels) or pie (the first series'
 * parts).
 */
export async function drawChart(canvas, spec) {
  const Chart = await loadChartJS();
  if (spec.kind === 'pie') return drawPie(Chart, canvas, spec);
  const line = spec.kind === 'line' || spec.kind === 'area' || spec.kind === 'scatter';
  const scatter = spec.kind === 'scatter';
  return new Chart(canvas, {
    type: line ? 'line' : 'bar',
    data: {
      labels: spec.labels,
      datasets: spec.datasets.map((d, i) => ({
        label: d.label,
        data: d.data,
        backgroundColor: spec.kind === 'area' ? `${PALETTE[i % PALETTE.length]}40` : line ? PALETTE[i % PALETTE.length] : `${PALETTE[i % PALETTE.length]}cc`,
        borderColor: PALETTE[i % PALETTE.length],
        borderWidth: line ? 2 : 0,
        borderRadius: line ? 0 : 3,
        fill: spec.kind === 'area' ? 'origin' : false,
        showLine: !scatter,
        pointRadius: scatter ? 3.5 : line && spec.labels.length > 60 ? 0 : 2.5,
        tension: 0.2,
        spanGaps: true,
      })),
    },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: { duration: 250 },
      interaction: { mode: 'index', intersect: false },
      plugins: {
        legend: { display: spec.datasets.length > 1, position: 'bottom', labels: { boxWidth: 12, font: { size: 12 } } },
        tooltip: { enabled: true },
      },
      scales: {
        x: { grid: { display: false }, ticks: { maxRotation: 50, autoSkip: true, font: { size: 11 } } },
        y: { beginAtZero: !line || spec.kind === 'area', grid: { color: '#eef0f3' }, ticks: { font: { size: 11 } } },
      },
    },
  });
}

function drawPie(Chart, canvas, spec) {
  const d = spec.datasets[0];
  return new Chart(canvas, {
    type: 'pie',
    data: {
      labels: spec.labels,
      datasets: [{ label: d.label, data: d.data, backgroundColor: spec.labels.map((_, i) => PALETTE[i % PALETTE.length]), borderColor: '#fff', borderWidth: 1 }],
    },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: { duration: 250 },
      plugins: {
        legend: { display: true, position: 'bottom', labels: { boxWidth: 12, font: { size: 12 } } },
        tooltip: { enabled: true },
      },
    },
  });
}
