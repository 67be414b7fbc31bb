// Command pdf measures PDF text extraction inside the binary (PDFium in
// WebAssembly, internal/extract) on every PDF in ../shared/data/docs, plus a
// generated Flate bomb, and compares it with poppler's pdftotext when that
// is on PATH (it is not needed otherwise; CI does not run this).
//
//	go run ./bench/pdf                       # Markdown table on stdout
//	go run ./bench/pdf -runs 10 -bomb=false
//	PATH=/opt/poppler/bin:$PATH go run ./bench/pdf
//
// For each file: pages, characters of text (not counting white space),
// paragraphs, and how alike the two texts are (Jaccard index of their word
// sets, and the share of words in common counting repeats); the time of a
// first read by a new instance (a new Extractor: a runtime from the
// process's compilation cache and a new instance) and of a warm read (the
// median of -runs reads by a reused instance); the WebAssembly memory the
// new instance reached, and pdftotext's peak RSS. Compiling PDFium, once per
// process, is reported on its own, and so is the process's peak RSS.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"

	"datachat"
	"datachat/internal/extract"
	"datachat/internal/retrieval/retrievaltest"
	"datachat/internal/testfiles"
)

func main() {
	var (
		runs    = flag.Int("runs", 5, "warm reads of each file (the median is reported)")
		bomb    = flag.Bool("bomb", true, "add a generated PDF whose content stream unpacks to 200 MiB of zeros")
		memory  = flag.Int64("memory", extract.DefaultPDFMemoryLimit, "WebAssembly memory limit per document, bytes")
		docsDir = flag.String("docs", "", "folder of PDFs (default ../shared/data/docs beside the repository)")
	)
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()

	if *docsDir == "" {
		d, err := retrievaltest.SharedDocs()
		if err != nil {
			log.Fatalf("shared documents not found (../shared/data/docs beside the repository): %v", err)
		}
		*docsDir = d
	}
	paths, err := filepath.Glob(filepath.Join(*docsDir, "*.pdf"))
	if err != nil || len(paths) == 0 {
		log.Fatalf("no PDF in %s (%v)", *docsDir, err)
	}
	type input struct {
		name string
		data []byte
	}
	var inputs []input
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			log.Fatal(err)
		}
		inputs = append(inputs, input{filepath.Base(p), data})
	}
	if *bomb {
		inputs = append(inputs, input{"flate-bomb.pdf (generated)", testfiles.FlateBomb()})
	}

	pdftotext, _ := exec.LookPath("pdftotext")
	opts := extract.PDFOptions{MemoryLimit: *memory, MaxConcurrent: 1}

	// The first read in the process compiles PDFium.
	first := extract.NewExtractor(opts)
	start := time.Now()
	_, err = first.Extract(ctx, bytes.NewReader(inputs[0].data), inputs[0].name, 0)
	coldProcess := time.Since(start)
	compile := first.PDFStats().Start
	if err != nil && datachat.ErrorCode(err) != datachat.EINVALID {
		log.Fatalf("%s: %v", inputs[0].name, err)
	}
	first.Close()

	var rows, errs []string
	for _, in := range inputs {
		r := row{name: in.name, size: len(in.data)}

		// A new Extractor: its runtime comes from the compilation cache,
		// its instance is new, so its memory is this file's peak.
		e := extract.NewExtractor(opts)
		t := time.Now()
		doc, err := e.Extract(ctx, bytes.NewReader(in.data), in.name, 0)
		r.first = time.Since(t)
		st := e.PDFStats()
		r.memory = st.LastMemory
		if err != nil {
			r.err = datachat.ErrorMessage(err)
		} else {
			r.pages, r.text, r.paras = doc.Pages, doc.Text(), len(doc.Blocks)
			var times []time.Duration
			for range *runs {
				t := time.Now()
				if _, err := e.Extract(ctx, bytes.NewReader(in.data), in.name, 0); err != nil {
					log.Fatalf("%s: warm read: %v", in.name, err)
				}
				times = append(times, time.Since(t))
			}
			r.warm = median(times)
		}
		e.Close()

		if pdftotext != "" {
			r.poppler = runPDFToText(pdftotext, in.data, *runs)
		}
		rows = append(rows, r.markdown(pdftotext != ""))
		if r.err != "" {
			errs = append(errs, fmt.Sprintf("- %s, in the binary: %s", in.name, r.err))
		}
		if r.poppler != nil && r.poppler.err != "" {
			errs = append(errs, fmt.Sprintf("- %s, pdftotext: %s", in.name, r.poppler.err))
		}
		log.Printf("%s done", in.name)
	}

	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	command := strings.Join(append([]string{"go run ./bench/pdf"}, os.Args[1:]...), " ")
	fmt.Printf("PDF text extraction: `%s` on %s/%s, %d CPUs, %s\n\n", command, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	fmt.Printf("- PDFium (go-pdfium %s, WebAssembly, wazero %s) compiled and started once per process in %s; the first read of the process took %s in all\n",
		moduleVersion("github.com/klippa-app/go-pdfium"), moduleVersion("github.com/tetratelabs/wazero"), round(compile), round(coldProcess))
	fmt.Printf("- memory limit %d MiB per document; peak RSS of this whole process %d MiB\n", *memory>>20, ru.Maxrss>>10)
	if pdftotext != "" {
		out, _ := exec.Command(pdftotext, "-v").CombinedOutput()
		fmt.Printf("- compared with %s\n", strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]))
	} else {
		fmt.Printf("- pdftotext not on PATH: no comparison\n")
	}
	fmt.Println()
	if pdftotext != "" {
		fmt.Println("| file | size | pages (new / pdftotext) | characters | paragraphs | word sets Jaccard | words in common | first read, new instance | warm read | pdftotext first / warm | WebAssembly memory | pdftotext peak RSS |")
		fmt.Println("|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
	} else {
		fmt.Println("| file | size | pages | characters | paragraphs | first read, new instance | warm read | WebAssembly memory |")
		fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	}
	for _, r := range rows {
		fmt.Println(r)
	}
	if len(errs) > 0 {
		fmt.Println()
		fmt.Println(strings.Join(errs, "\n"))
	}
}

type row struct {
	name         string
	size         int
	pages, paras int
	text         string
	err          string
	first, warm  time.Duration
	memory       int64
	poppler      *popplerRun
}

type popplerRun struct {
	pages, paras int
	text         string
	err          string
	first, warm  time.Duration
	maxRSS       int64 // bytes
}

func (r row) markdown(compare bool) string {
	size := fmt.Sprintf("%d KiB", r.size>>10)
	mem := fmt.Sprintf("%.1f MiB", float64(r.memory)/(1<<20))
	side := func(err string, pages, text string, paras int) (string, string, string) {
		if err != "" {
			return "error", "–", "–"
		}
		return pages, text, fmt.Sprint(paras)
	}
	pg, ch, pa := side(r.err, fmt.Sprint(r.pages), fmt.Sprint(chars(r.text)), r.paras)
	if !compare {
		return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s |", r.name, size, pg, ch, pa, round(r.first), round(r.warm), mem)
	}
	p := r.poppler
	ppg, pch, ppa := side(p.err, fmt.Sprint(p.pages), fmt.Sprint(chars(p.text)), p.paras)
	jac, common := "–", "–"
	if r.err == "" && p.err == "" {
		j, c := similarity(r.text, p.text)
		jac, common = fmt.Sprintf("%.3f", j), fmt.Sprintf("%.3f", c)
	}
	rss := "–"
	if p.maxRSS >= 0 {
		rss = fmt.Sprintf("%.1f MiB", float64(p.maxRSS)/(1<<20))
	}
	return fmt.Sprintf("| %s | %s | %s / %s | %s / %s | %s / %s | %s | %s | %s | %s | %s / %s | %s | %s |",
		r.name, size, pg, ppg, ch, pch, pa, ppa, jac, common,
		round(r.first), round(r.warm), round(p.first), round(p.warm), mem, rss)
}

// runPDFToText runs pdftotext as the extractor used to (UTF-8, Unix line
// ends, pages at form feeds), once and then runs times.
func runPDFToText(prog string, data []byte, runs int) *popplerRun {
	f, err := os.CreateTemp("", "bench-pdf-*.pdf")
	if err != nil {
		log.Fatal(err)
	}
	defer os.Remove(f.Name())
	f.Write(data)
	f.Close()
	timeProg, _ := exec.LookPath("/usr/bin/time")
	p := &popplerRun{maxRSS: -1}
	var times []time.Duration
	for i := range runs + 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		args := []string{prog, "-enc", "UTF-8", "-eol", "unix", f.Name(), "-"}
		if timeProg != "" {
			// The rusage of a child of this process would count this
			// process's memory (Go starts children with vfork); GNU
			// time forks from its own small process.
			args = append([]string{timeProg, "-f", "maxrss %M"}, args...)
		}
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		t := time.Now()
		err := cmd.Run()
		d := time.Since(t)
		cancel()
		if timeProg != "" {
			errText := strings.TrimRight(stderr.String(), "\n")
			if i := strings.LastIndex(errText, "maxrss "); i >= 0 {
				var kb int64
				fmt.Sscan(errText[i+len("maxrss "):], &kb)
				p.maxRSS = max(p.maxRSS, kb<<10)
				errText = errText[:i]
			}
			stderr.Reset()
			stderr.WriteString(errText)
			if err != nil && strings.Contains(errText, "Command exited with non-zero status") {
				errText = errText[:strings.LastIndex(errText, "Command exited")]
				stderr.Reset()
				stderr.WriteString(errText)
			}
		}
		if i == 0 {
			p.first = d
			if err != nil {
				var exit *exec.ExitError
				if !errors.As(err, &exit) {
					log.Fatal(err)
				}
				p.err = strings.TrimSpace(strings.SplitN(stderr.String(), "\n", 2)[0])
				if p.err == "" {
					p.err = err.Error()
				}
				return p
			}
			p.text, p.pages, p.paras = cleanPDFToText(stdout.String())
			continue
		}
		times = append(times, d)
	}
	p.warm = median(times)
	return p
}

// cleanPDFToText does to pdftotext's output what the extractor did: pages at
// form feeds, paragraphs at blank lines, dot leaders shortened, a word broken
// by a hyphen at a line end joined.
func cleanPDFToText(out string) (text string, pages, paras int) {
	pageTexts := strings.Split(out, "\f")
	if len(pageTexts) > 1 && strings.TrimSpace(pageTexts[len(pageTexts)-1]) == "" {
		pageTexts = pageTexts[:len(pageTexts)-1]
	}
	var parts []string
	for _, page := range pageTexts {
		for para := range strings.SplitSeq(page, "\n\n") {
			if para = strings.TrimSpace(para); para != "" {
				para = dotLeaders.ReplaceAllString(para, " … ")
				parts = append(parts, brokenWord.ReplaceAllString(para, "$1$2"))
			}
		}
	}
	return strings.Join(parts, "\n\n"), len(pageTexts), len(parts)
}

var (
	brokenWord = regexp.MustCompile(`([a-z])-\n([a-z])`)
	dotLeaders = regexp.MustCompile(`(?:[ \t]*\.){5,}[ \t]*`)
)

// similarity returns the Jaccard index of the word sets of a and b, and the
// words they have in common counting repeats over the larger word count.
func similarity(a, b string) (jaccard, common float64) {
	wa, wb := words(a), words(b)
	union, inter, shared, na, nb := 0, 0, 0, 0, 0
	for w, n := range wa {
		na += n
		union++
		if m, ok := wb[w]; ok {
			inter++
			shared += min(n, m)
		}
	}
	for w, m := range wb {
		nb += m
		if _, ok := wa[w]; !ok {
			union++
		}
	}
	if union == 0 {
		return 1, 1
	}
	return float64(inter) / float64(union), float64(shared) / float64(max(na, nb))
}

func words(s string) map[string]int {
	m := map[string]int{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		m[w]++
	}
	return m
}

// chars counts the characters of s that are not white space.
func chars(s string) int {
	n := 0
	for _, r := range s {
		if !unicode.IsSpace(r) {
			n++
		}
	}
	return n
}

func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "?"
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

func round(d time.Duration) string {
	switch {
	case d == 0:
		return "–"
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}
