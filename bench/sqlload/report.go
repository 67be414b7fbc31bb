package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) string {
	v := float64(d.Microseconds()) / 1000
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func mib(b int64) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) }

// stats are one row of the per-kind table.
type stats struct {
	n, ok, busy, failed int
	lat                 []time.Duration // of successful requests, sorted
}

func collect(samples []sample, keep func(sample) bool) stats {
	var s stats
	for _, sm := range samples {
		if !keep(sm) {
			continue
		}
		s.n++
		switch sm.outcome {
		case outcomeOK:
			s.ok++
			s.lat = append(s.lat, sm.took)
		case outcomeBusy:
			s.busy++
		case outcomeFailed:
			s.failed++
		}
	}
	slices.Sort(s.lat)
	return s
}

func (s stats) row(name string, wall time.Duration) string {
	if s.n == 0 {
		return fmt.Sprintf("| %s | 0 | | | | | | | |", name)
	}
	return fmt.Sprintf("| %s | %d | %.1f | %d | %d | %s | %s | %s | %s |", name, s.n, float64(s.n)/wall.Seconds(), s.busy, s.failed,
		ms(percentile(s.lat, .5)), ms(percentile(s.lat, .9)), ms(percentile(s.lat, .99)), ms(percentile(s.lat, 1)))
}

func printReport(o options, cmdline string, m machine, r *loadResult, base *baselineResult) {
	all := func(k kind) func(sample) bool { return func(s sample) bool { return s.kind == k } }
	sqlAll := collect(r.samples, all(opSQL))
	chat := collect(r.samples, all(opChat))

	fmt.Println()
	fmt.Println("## datachat SQL load")
	fmt.Println()
	fmt.Printf("Command: `%s`\n\n", cmdline)
	fmt.Printf("Machine: %s; at the end %s.", m, r.loadEnd)
	if b, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled"); err == nil && strings.TrimSpace(string(b)) == "1" {
		fmt.Print(" The kernel groups processes by session (sched_autogroup): the harness's session gets a fair share of the CPU against each other busy session, whatever its nice.")
	}
	fmt.Print("\n\n")
	var extra []string
	for _, kv := range r.serverEnv {
		if strings.HasPrefix(kv, "DATACHAT_") && !strings.HasPrefix(kv, "DATACHAT_DATA_DIR=") && !strings.HasPrefix(kv, "DATACHAT_ADDR=") &&
			!strings.HasPrefix(kv, "DATACHAT_LOG_") {
			extra = append(extra, kv)
		}
	}
	fmt.Printf("Server: `datachat serve` with %s (SQL engine otherwise at its defaults); provider: llmtest OpenAI fake in the harness. Log: %s%s.\n\n",
		strings.Join(extra, ", "), r.serveLog, map[bool]string{true: "", false: " (removed; -keep keeps it)"}[o.keep])
	fmt.Printf("Load: %d users with one conversation each (a %d-row, 5-column CSV as table `sales`), think time uniform in [0, %v) before each operation, mix %s; query `%s`.\n\n",
		o.n, o.rows, o.think, mixText(o.mix), groupBy)

	sqlSt := sqlAll
	fmt.Println("| N | duration | requests | sql GROUP BY p50 / p90 / p99 / max (ms) | busy 503 (sql / chat / upload / delete) | other errors (sql / chat / upload / delete) | chat turn p50 / p99 (ms) | server CPU (cores) | workers CPU (cores) | server RSS start → peak (MiB) | workers at peak: processes, RSS sum (private) (MiB) | baseline bare DuckDB p50 / p99 (ms) |")
	fmt.Println("|---:|---:|---:|---|---|---|---|---:|---:|---|---|---|")
	var busyK, failK []string
	for k := range numKinds {
		st := collect(r.samples, all(k))
		busyK = append(busyK, strconv.Itoa(st.busy))
		failK = append(failK, strconv.Itoa(st.failed))
	}
	baseCol := "—"
	if base != nil {
		baseCol = ms(percentile(base.lat, .5)) + " / " + ms(percentile(base.lat, .99))
	}
	fmt.Printf("| %d | %v | %d | %s / %s / %s / %s | %s | %s | %s / %s | %.2f | %.2f | %s → %s | %d, %s (%s) | %s |\n\n",
		o.n, r.wall.Round(time.Second), len(r.samples),
		ms(percentile(sqlSt.lat, .5)), ms(percentile(sqlSt.lat, .9)), ms(percentile(sqlSt.lat, .99)), ms(percentile(sqlSt.lat, 1)),
		strings.Join(busyK, " / "), strings.Join(failK, " / "), ms(percentile(chat.lat, .5)), ms(percentile(chat.lat, .99)),
		r.serverCPU.Seconds()/r.wall.Seconds(), r.workerCPU.Seconds()/r.wall.Seconds(),
		mib(r.res.serverRSSStart), mib(r.res.serverRSSPeak), r.res.workersAtRSS, mib(r.res.workersRSSPeak), mib(r.res.workersPrivPeak), baseCol)

	fmt.Println("| requests | count | per s | busy 503 | other errors | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	fmt.Println(sqlAll.row("`/sql` GROUP BY, all", r.wall))
	fmt.Println(collect(r.samples, func(s sample) bool { return s.kind == opSQL && !s.cold }).row("`/sql` GROUP BY, tables unchanged since the last query", r.wall))
	coldName := "`/sql` GROUP BY, first after an upload or delete (a new worker)"
	if !o.warmup {
		coldName = "`/sql` GROUP BY, first after the start, an upload or a delete (a new worker)"
	}
	fmt.Println(collect(r.samples, func(s sample) bool { return s.kind == opSQL && s.cold }).row(coldName, r.wall))
	fmt.Println(chat.row("chat turn (`/chat/query`: 2 model calls + the GROUP BY)", r.wall))
	fmt.Println(collect(r.samples, all(opUpload)).row(fmt.Sprintf("upload of a %d-row CSV", o.extraRows), r.wall))
	fmt.Println(collect(r.samples, all(opDelete)).row("delete of a second dataset", r.wall))
	if base != nil {
		b := stats{n: len(base.lat) + base.errs, ok: len(base.lat), failed: base.errs, lat: base.lat}
		fmt.Println(b.row(fmt.Sprintf("baseline: the GROUP BY through bare DuckDB in-process (%s, %d threads, %d instance(s); %.2f cores)",
			base.version, base.threads, base.instances, base.cpu.Seconds()/base.wall.Seconds()), base.wall))
	}
	var engine []time.Duration
	for _, s := range r.samples {
		if s.kind == opSQL && s.outcome == outcomeOK {
			engine = append(engine, time.Duration(s.engineMS*float64(time.Millisecond)))
		}
	}
	slices.Sort(engine)
	fmt.Println()
	fmt.Printf("Setup: %d uploads of the %d-row CSV, 8 at a time: p50 %s ms, max %s ms.\n",
		len(r.setupUploads), o.rows, ms(percentile(r.setupUploads, .5)), ms(percentile(r.setupUploads, 1)))
	if len(r.warmup) > 0 {
		fmt.Printf("Warm-up, before the load: each conversation's first GROUP BY (it opens the conversation's worker), 8 at a time: p50 %s ms, max %s ms.\n",
			ms(percentile(r.warmup, .5)), ms(percentile(r.warmup, 1)))
	}
	fmt.Printf("`/sql` elapsed_ms (DuckDB's execution and fetch inside the worker): p50 %s ms, p99 %s ms, max %s ms; the rest of the latency is HTTP, the store, the queue, the worker's start and the pipe.\n",
		ms(percentile(engine, .5)), ms(percentile(engine, .99)), ms(percentile(engine, 1)))
	if r.queue.samples > 0 {
		fmt.Printf("SQL engine (from /metrics each second): queued max %d, mean %.1f; running max %d, mean %.1f.\n",
			r.queue.maxQueued, float64(r.queue.sumQueued)/float64(r.queue.samples), r.queue.maxRun, float64(r.queue.sumRun)/float64(r.queue.samples))
	}
	fmt.Printf("Processes: server RSS peak %s MiB; worker processes at most %d at once (%d distinct over the run), their RSS summed at most %s MiB (%s MiB private), server + workers at most %s MiB.\n",
		mib(r.res.serverRSSPeak), r.res.workersPeak, r.res.workersSeen, mib(r.res.workersRSSPeak), mib(r.res.workersPrivPeak), mib(r.res.totalRSSPeak))
	ours := (r.serverCPU + r.workerCPU + r.harnessCPU).Seconds() / r.wall.Seconds()
	fmt.Printf("CPU during the load, in cores: server %.2f, workers %.2f, harness (client, fake) %.2f; everything else on the machine %.2f (the machine was %.2f of %d busy).\n",
		r.serverCPU.Seconds()/r.wall.Seconds(), r.workerCPU.Seconds()/r.wall.Seconds(), r.harnessCPU.Seconds()/r.wall.Seconds(),
		max(0, r.machineBusy-ours), r.machineBusy, runtime.NumCPU())
	if n := len(r.samples); n > 0 {
		fmt.Printf("CPU per operation (server + workers over all %d operations): %.1f ms.\n", n, (r.serverCPU+r.workerCPU).Seconds()*1000/float64(n))
	}

	timeline(o, r)
	errorList(r.samples)

	fmt.Println()
	fmt.Printf("Targets (%d active conversations, mixed load):\n", o.n)
	totalBusy := 0
	for _, s := range r.samples {
		if s.outcome == outcomeBusy {
			totalBusy++
		}
	}
	verdict := func(okay bool) string { return map[bool]string{true: "met", false: "MISSED"}[okay] }
	p50, p99 := percentile(sqlAll.lat, .5), percentile(sqlAll.lat, .99)
	fmt.Printf("- no busy refusal for a user within their limits (each user runs one request at a time): %d busy — %s\n", totalBusy, verdict(totalBusy == 0))
	fmt.Printf("- small GROUP BY p50 ≤ 100 ms: %s ms — %s\n", ms(p50), verdict(len(sqlAll.lat) > 0 && p50 <= 100*time.Millisecond))
	fmt.Printf("- small GROUP BY p99 ≤ 1 s: %s ms — %s\n", ms(p99), verdict(len(sqlAll.lat) > 0 && p99 <= time.Second))
	if r.sqlMetrics != "" {
		fmt.Println()
		fmt.Println("The server's own SQL histogram, datachat_sql_query_duration_seconds (queueing included; source chat: execute_sql in chat turns, api: `/sql`):")
		fmt.Println()
		fmt.Println(r.sqlMetrics)
	}
}

// timeline prints the GROUP BY latency and the chat turns by window, to show
// drift over the run.
func timeline(o options, r *loadResult) {
	win := max(o.duration/10, 10*time.Second)
	n := int((o.duration + win - 1) / win)
	if n <= 1 {
		return
	}
	fmt.Println()
	fmt.Println("| window | sql n | sql p50 (ms) | sql p99 (ms) | chat n | chat p50 (ms) | busy | other errors |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	for w := range n {
		in := func(k kind) func(sample) bool {
			return func(s sample) bool {
				return s.kind == k && s.at >= time.Duration(w)*win && (s.at < time.Duration(w+1)*win || w == n-1)
			}
		}
		sq, ch := collect(r.samples, in(opSQL)), collect(r.samples, in(opChat))
		bz, fl := 0, 0
		for k := range numKinds {
			st := collect(r.samples, in(k))
			bz += st.busy
			fl += st.failed
		}
		fmt.Printf("| %v–%v | %d | %s | %s | %d | %s | %d | %d |\n", time.Duration(w)*win, time.Duration(w+1)*win,
			sq.n, ms(percentile(sq.lat, .5)), ms(percentile(sq.lat, .99)), ch.n, ms(percentile(ch.lat, .5)), bz, fl)
	}
}

// errorList prints each distinct busy or error message with its count.
func errorList(samples []sample) {
	counts := map[string]int{}
	for _, s := range samples {
		if s.outcome != outcomeOK {
			msg := s.msg
			if len(msg) > 200 {
				msg = msg[:200] + "…"
			}
			counts[fmt.Sprintf("%s %s: %s", kindNames[s.kind], map[outcome]string{outcomeBusy: "busy", outcomeFailed: "error"}[s.outcome], msg)]++
		}
	}
	if len(counts) == 0 {
		return
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return counts[b] - counts[a] })
	fmt.Println()
	fmt.Println("Busy refusals and errors:")
	for _, k := range keys {
		fmt.Printf("- %d× %s\n", counts[k], k)
	}
}
