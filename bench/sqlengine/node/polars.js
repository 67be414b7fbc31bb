// Runs the bench/sqlengine queries in Polars SQL (nodejs-polars) over the same
// Parquet files, lazily scanned, and prints the median milliseconds of each as
// JSON: node polars.js DIR RUNS QUERIES_JSON
"use strict";
const pl = require("nodejs-polars");
const path = require("path");

const [dir, runsArg, queriesJSON] = process.argv.slice(2);
const runs = Number(runsArg || 5);
const queries = JSON.parse(queriesJSON);

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const ctx = pl.SQLContext({
  sales: pl.scanParquet(path.join(dir, "sales.parquet")),
  customers: pl.scanParquet(path.join(dir, "customers.parquet")),
});
const out = {};
for (const q of queries) {
  let rows = 0;
  const times = [];
  for (let i = 0; i < runs + 1; i++) {
    const t0 = process.hrtime.bigint();
    const df = ctx.execute(q.sql).collectSync();
    rows = df.height;
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (i > 0) times.push(ms); // the first run warms up
  }
  out[q.name] = { ms: median(times), rows };
}
process.stdout.write(JSON.stringify(out));
