// Command rss measures the memory `datachat serve` holds: idle after its
// start on a fresh data directory, and after a burst, against a baseline
// binary in the same run. It starts each binary in turn (alternating, -rounds
// times), samples the server's VmRSS from /proc/PID/status every -every, and
// reports it as Markdown, with the load average around each run (the
// machine is shared).
//
//	go run ./bench/rss -base-ref main          # this tree against main, built from a git worktree
//	go run ./bench/rss -base /tmp/datachat-old # against a binary built before
//	go run ./bench/rss -sockets 0 -pdfs 0      # start-up only
//
// The burst, once the idle samples are taken: -sockets WebSockets opened on
// one conversation and left unread (stalled clients), -pdfs PDF documents
// of -pages pages uploaded at once, then the sockets closed; the samples go
// on for -after. Traffic goes to 127.0.0.1 only; the servers are stopped at
// the end and on failure.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"datachat/bench/internal/report"
	"datachat/bench/internal/serve"
	"datachat/internal/testfiles"
)

type options struct {
	bin, base, baseRef string
	idle, after, hold  time.Duration
	every              time.Duration
	sockets, pdfs      int
	pages, rounds      int
	keep               bool
}

func main() {
	log.SetFlags(log.Ltime)
	var o options
	flag.StringVar(&o.bin, "bin", "", "datachat binary to measure (default: go build ./cmd/datachat)")
	flag.StringVar(&o.base, "base", "", "baseline datachat binary")
	flag.StringVar(&o.baseRef, "base-ref", "", "build the baseline from this git revision (a worktree of it), e.g. main")
	flag.DurationVar(&o.idle, "idle", 40*time.Second, "how long the idle server is sampled after it answers /healthz")
	flag.DurationVar(&o.after, "after", 90*time.Second, "how long the server is sampled after the burst")
	flag.DurationVar(&o.hold, "hold", 5*time.Second, "how long the burst's WebSockets stay open")
	flag.DurationVar(&o.every, "every", 250*time.Millisecond, "sampling interval")
	flag.IntVar(&o.sockets, "sockets", 1000, "WebSockets opened in the burst, never read (0: none)")
	flag.IntVar(&o.pdfs, "pdfs", 8, "PDF documents uploaded at once in the burst (0: none)")
	flag.IntVar(&o.pages, "pages", 200, "pages of each PDF")
	flag.IntVar(&o.rounds, "rounds", 1, "runs of each binary, alternating")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (data directories, server logs)")
	flag.Parse()
	cmdline := "go run ./bench/rss " + strings.Join(os.Args[1:], " ")

	work, done, err := serve.WorkDir("rss", o.keep)
	if err != nil {
		log.Fatal(err)
	}
	defer done()
	if o.bin == "" {
		o.bin = filepath.Join(work, "datachat")
		build(".", o.bin)
	}
	if o.baseRef != "" {
		o.base = filepath.Join(work, "datachat-base")
		tree := filepath.Join(work, "base-tree")
		run("git", "worktree", "add", "--detach", tree, o.baseRef)
		defer run("git", "worktree", "remove", "--force", tree)
		build(tree, o.base)
	}
	type binary struct{ name, path string }
	bins := []binary{{"this tree", o.bin}}
	if o.base != "" {
		name := "baseline"
		if o.baseRef != "" {
			name += " (" + o.baseRef + ")"
		}
		bins = append([]binary{{name, o.base}}, bins...)
	}
	var results []*result
	for r := range o.rounds {
		for _, b := range bins {
			log.Printf("round %d: %s", r+1, b.name)
			res, err := measure(o, work, b.path)
			if err != nil {
				log.Fatalf("%s: %v", b.name, err)
			}
			res.name = b.name
			results = append(results, res)
		}
	}
	printReport(o, cmdline, results)
}

func build(dir, out string) {
	log.Printf("building %s from %s", out, dir)
	if err := serve.Build(dir, out); err != nil {
		log.Fatal(err)
	}
}

func run(name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
}

// sample is the server's resident memory at a time since it answered.
type sample struct {
	at  time.Duration
	rss int64 // bytes
}

type result struct {
	name               string
	idle, after        []sample
	burst              time.Duration // the burst's own length (sockets open, PDFs read)
	loadStart, loadEnd string
	pdfErrors          int
}

// measure runs one server: idle samples, the burst, samples after it.
func measure(o options, work, bin string) (*result, error) {
	dir, logf, err := serve.Fresh(work, "serve")
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	res := &result{loadStart: report.LoadAvg()}
	cmd := exec.Command(bin, "serve")
	cmd.Env = serve.Env(dir)
	p, err := serve.Start(cmd, logf, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	defer p.Stop(20 * time.Second)
	begin := time.Now()
	res.idle = sampleFor(p.PID, begin, o.idle, o.every)
	if o.sockets > 0 || o.pdfs > 0 {
		ids, err := p.CreateConversations(1, "burst")
		if err != nil {
			return nil, err
		}
		start := time.Now()
		if res.pdfErrors, err = burst(o, p, ids[0]); err != nil {
			return nil, err
		}
		res.burst = time.Since(start)
		res.after = sampleFor(p.PID, time.Now(), o.after, o.every)
	}
	res.loadEnd = report.LoadAvg()
	return res, nil
}

// sampleFor samples pid's VmRSS every interval for d, times counted from
// since.
func sampleFor(pid int, since time.Time, d, every time.Duration) []sample {
	var out []sample
	end := time.Now().Add(d)
	for {
		out = append(out, sample{at: time.Since(since), rss: serve.Status(pid, "VmRSS:")})
		if time.Now().After(end) {
			return out
		}
		time.Sleep(every)
	}
}

// burst opens the WebSockets, uploads the PDFs at once, then closes the
// sockets once hold has passed since they opened. It returns the PDFs that
// failed.
func burst(o options, p *serve.Process, conv string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var conns []*websocket.Conn
	defer func() {
		for _, c := range conns {
			c.CloseNow()
		}
	}()
	opened := time.Now()
	for i := range o.sockets {
		c, _, err := websocket.Dial(ctx, "ws://"+p.Addr+"/ws?conversation_id="+conv+"&api_key="+p.Key, nil)
		if err != nil {
			return 0, fmt.Errorf("WebSocket %d: %w", i, err)
		}
		conns = append(conns, c)
	}
	pdf := pdfFile(o.pages)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for i := range o.pdfs {
		wg.Go(func() {
			if err := uploadPDF(ctx, p, conv, fmt.Sprintf("report-%d.pdf", i), pdf); err != nil {
				log.Printf("PDF %d: %v", i, err)
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wait := o.hold - time.Since(opened); wait > 0 {
		time.Sleep(wait)
	}
	return failed, nil
}

// pdfFile is a PDF of n pages of text.
func pdfFile(n int) []byte {
	pages := make([][]byte, n)
	for i := range pages {
		var paras [][]string
		for j := range 6 {
			paras = append(paras, []string{
				fmt.Sprintf("Page %d, paragraph %d: revenue by region grew in the quarter under review.", i+1, j+1),
				"The northern and western regions led; the islands lagged behind the forecast.",
				"Costs were flat, and the margin widened by two points over the year before.",
			})
		}
		pages[i] = testfiles.TextPage(paras...)
	}
	return testfiles.PDF{Flate: true, Pages: pages}.Bytes()
}

func uploadPDF(ctx context.Context, p *serve.Process, conv, name string, data []byte) error {
	ct, upload := serve.Multipart(name, data)
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+p.Addr+"/api/conversations/"+conv+"/documents", bytes.NewReader(upload))
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", p.Key)
	req.Header.Set("Content-Type", ct)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 {
		return errors.New(resp.Status + ": " + string(body))
	}
	return nil
}

// at returns the sample nearest to d (the last one at or before it).
func at(s []sample, d time.Duration) sample {
	out := s[0]
	for _, x := range s {
		if x.at > d {
			break
		}
		out = x
	}
	return out
}

func peak(s []sample) sample {
	out := s[0]
	for _, x := range s {
		if x.rss > out.rss {
			out = x
		}
	}
	return out
}

func mib(n int64) string { return fmt.Sprintf("%.0f", float64(n)/(1<<20)) }

func printReport(o options, cmdline string, results []*result) {
	fmt.Printf("\n## datachat serve memory (VmRSS)\n\nCommand: `%s`\n\n", cmdline)
	idleMarks := []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, o.idle}
	fmt.Print("Idle, fresh data directory, from when /healthz first answers (MiB):\n\n| binary | load average (start → end) |")
	for _, m := range idleMarks {
		fmt.Printf(" %s |", m)
	}
	fmt.Print(" peak |\n|---|---|")
	for range idleMarks {
		fmt.Print("---:|")
	}
	fmt.Print("---:|\n")
	for _, r := range results {
		fmt.Printf("| %s | %s → %s |", r.name, r.loadStart, r.loadEnd)
		for _, m := range idleMarks {
			fmt.Printf(" %s |", mib(at(r.idle, m).rss))
		}
		pk := peak(r.idle)
		fmt.Printf(" %s (at %.1f s) |\n", mib(pk.rss), pk.at.Seconds())
	}
	if results[0].after == nil {
		return
	}
	afterMarks := []time.Duration{0, 10 * time.Second, 20 * time.Second, 30 * time.Second, 45 * time.Second, 60 * time.Second, o.after}
	fmt.Printf("\nAfter the burst (%d WebSockets left unread for %s, %d PDFs of %d pages uploaded at once, then the sockets closed), from its end (MiB):\n\n| binary | burst took | PDFs failed | before |", o.sockets, o.hold, o.pdfs, o.pages)
	for _, m := range afterMarks {
		fmt.Printf(" +%s |", m)
	}
	fmt.Print("\n|---|---:|---:|---:|")
	for range afterMarks {
		fmt.Print("---:|")
	}
	fmt.Println()
	for _, r := range results {
		fmt.Printf("| %s | %.1f s | %d | %s |", r.name, r.burst.Seconds(), r.pdfErrors, mib(r.idle[len(r.idle)-1].rss))
		for _, m := range afterMarks {
			fmt.Printf(" %s |", mib(at(r.after, m).rss))
		}
		fmt.Println()
	}
}
