// Command yamlbomb measures the hostile YAML documents of the red team
// (internal/testfiles' generators, at the red team's sizes) read into a
// data dictionary by the decoder the server used before (goccy/go-yaml's
// UnmarshalWithOptions) and by internal/yamlsafe: the time, the peak heap
// (runtime.ReadMemStats, sampled every 5 ms) and the peak RSS of the
// process. Each case runs in a process of its own, stopped after 20 s or
// 3 GiB of heap, since the old decoder does not stop by itself.
//
//	go run ./bench/yamlbomb
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	goccy "github.com/goccy/go-yaml"

	"datachat"
	"datachat/internal/testfiles"
	"datachat/internal/yamlsafe"
)

type bomb struct {
	name string
	doc  func() string
	any  bool // decoded into an interface, not a dictionary
}

var bombs = []bomb{
	{"merge keys (20 levels × 9)", func() string { return testfiles.YAMLMerges(20, 9) }, false},
	{"anchors/aliases (billion laughs, 9 × 9)", func() string { return "notes: x\n" + laughColumns() }, false},
	{"nested 40,000 deep (flow)", func() string { return testfiles.YAMLDeepFlow(40_000) }, false},
	{"nested 40,000 deep (block)", func() string { return testfiles.YAMLDeepBlock(40_000) }, false},
	{"1 MiB, 60,000 keys in one mapping", func() string { return testfiles.YAMLManyKeys(60_000) }, false},
	{"1 MiB, 500,000 values", func() string { return testfiles.YAMLDenseList(500_000) }, false},
	{"a legitimate dictionary, 2,000 columns", legit, false},
	// The most yamlsafe accepts of each kind: what its limits cost.
	{"at the value limit: 49,000 values, into an interface", func() string { return testfiles.YAMLDenseList(49_000) }, true},
	{"at the key limit: 7,000 keys in one mapping", func() string { return testfiles.YAMLManyKeys(7_000) }, false},
	{"near the alias limit: 117,649 values through aliases, into an interface", func() string {
		return "notes: x\nx: " + strings.TrimPrefix(testfiles.YAMLDenseList(2000), "notes: ") + "y: " +
			strings.ReplaceAll("\n"+testfiles.YAMLLaughs(6, 7), "\n", "\n  ") + "\n"
	}, true},
}

// laughColumns is a billion laughs whose last level is a dictionary's
// column map: 9 columns, each an alias to 9 levels of nine-fold lists.
func laughColumns() string {
	return "x: " + strings.ReplaceAll("\n"+testfiles.YAMLLaughs(9, 9), "\n", "\n  ") + "\ndatasets:\n  t:\n    columns: {a: *a8, b: *a8, c: *a8}\n"
}

func legit() string {
	var b strings.Builder
	b.WriteString("notes: |\n  Revenue excludes refunds.\ndatasets:\n  orders:\n    description: One row per order.\n    columns:\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "      column_%d: The %d-th measure of the order, in euros, before tax.\n", i, i)
	}
	return b.String()
}

type result struct {
	Seconds  float64 `json:"seconds"`
	PeakHeap uint64  `json:"peak_heap"`
	Stopped  string  `json:"stopped,omitempty"`
	Error    string  `json:"error,omitempty"`
}

func main() {
	child := flag.Int("case", -1, "run one case (internal)")
	decoder := flag.String("decoder", "", "goccy or yamlsafe (internal)")
	flag.Parse()
	if *child >= 0 {
		runCase(bombs[*child], *decoder)
		return
	}
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	fmt.Printf("| document | bytes | decoder | time | peak heap | peak RSS | outcome |\n|---|---:|---|---:|---:|---:|---|\n")
	for i, b := range bombs {
		size := len(b.doc())
		for _, dec := range []string{"goccy", "yamlsafe"} {
			cmd := exec.Command(self, "-case", fmt.Sprint(i), "-decoder", dec)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			var r result
			if err != nil || json.Unmarshal(out, &r) != nil {
				fmt.Printf("| %s | %d | %s | | | | failed: %v %s |\n", b.name, size, dec, err, out)
				continue
			}
			rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
			outcome := r.Stopped
			if outcome == "" {
				outcome = "finished"
				if r.Error != "" {
					outcome = "refused: " + clip(r.Error, 90)
				}
			}
			fmt.Printf("| %s | %d | %s | %.3f s | %s | %s | %s |\n", b.name, size, dec, r.Seconds, mib(r.PeakHeap), mib(uint64(rss)), outcome)
		}
	}
}

func runCase(b bomb, decoder string) {
	doc := []byte(b.doc())
	runtime.GC()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		var d datachat.Dictionary
		var a any
		switch {
		case decoder == "goccy" && b.any:
			done <- goccy.Unmarshal(doc, &a)
		case decoder == "goccy":
			done <- goccy.UnmarshalWithOptions(doc, &d, goccy.DisallowUnknownField())
		case b.any:
			done <- yamlsafe.Unmarshal(context.Background(), doc, &a, yamlsafe.Options{What: "the document"})
		default:
			done <- yamlsafe.Unmarshal(context.Background(), doc, &d, yamlsafe.Options{What: "the dictionary file", Strict: true})
		}
		runtime.KeepAlive(&a)
	}()
	var peak uint64
	tick := time.NewTicker(5 * time.Millisecond)
	var r result
	for r.Seconds == 0 {
		select {
		case err := <-done:
			r.Seconds = time.Since(start).Seconds()
			if err != nil {
				r.Error = err.Error()
			}
		case <-tick.C:
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			if d := time.Since(start); d > 20*time.Second || ms.HeapAlloc > 3<<30 {
				r.Seconds = d.Seconds()
				r.Stopped = fmt.Sprintf("stopped, still running (%s allocated in all)", mib(ms.TotalAlloc))
			}
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.PeakHeap = max(peak, ms.HeapAlloc)
	json.NewEncoder(os.Stdout).Encode(r)
	os.Exit(0)
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
