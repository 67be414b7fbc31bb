package duckdb

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// TestIngestWorkerReachesOnlyItsJob: an upload's worker, though started
// ahead of its job, reaches that job's directory only. Another upload's
// file, linked into the job as its input (as a path an attacker could make a
// worker follow), is not read — while uploads from different conversations
// are converted one after the other and at once. Without Landlock the same
// link is read, so the refusal is the kernel's.
func TestIngestWorkerReachesOnlyItsJob(t *testing.T) {
	if abi, err := llsys.LandlockGetABIVersion(); err != nil || abi < 1 {
		t.Skip("needs a Linux kernel with Landlock (5.13 or later, with landlock in its lsm= list)")
	}
	const secret = "only-alice-may-read-this"
	// Compressed, so that the worker's own Go code reads the link (the
	// decompression) before DuckDB, whose allowed_directories would refuse
	// the link by itself, sees anything.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("name,note\nalice," + secret + "\n"))
	zw.Close()
	alice := ingestJob(t, gz.Bytes())
	mallory := func() IngestJob {
		job := ingestJob(t, nil)
		os.Remove(filepath.Join(job.Dir, IngestInput))
		if err := os.Symlink(filepath.Join(alice.Dir, IngestInput), filepath.Join(job.Dir, IngestInput)); err != nil {
			t.Fatal(err)
		}
		return job
	}
	leaked := func(res *IngestResult, err error) bool {
		if err != nil && strings.Contains(err.Error(), secret) {
			return true
		}
		if res == nil {
			return false
		}
		for _, tb := range res.Tables {
			for _, c := range tb.Columns {
				if slices.ContainsFunc(c.Samples, func(s string) bool { return strings.Contains(s, secret) }) {
					return true
				}
			}
		}
		return false
	}

	e := mustEngine(t, Options{Threads: 1, IngestWorkers: 2})
	ctx := t.Context()
	if _, err := e.Ingest(ctx, alice); err != nil {
		t.Fatalf("alice's own upload: %v", err)
	}
	// After alice's upload, in a process of the same pool.
	job := mallory()
	res, err := e.Ingest(ctx, job)
	if err == nil || leaked(res, err) {
		t.Fatalf("an upload linking to another's file: %+v, %v; want it refused", res, err)
	}
	t.Logf("refused: %v", err)
	if out, err := filepath.Glob(filepath.Join(job.Dir, "*.parquet")); err != nil || len(out) > 0 {
		t.Errorf("the refused upload left an output: %v %v", out, err)
	}
	// At the same time as another upload.
	errs := make(chan error, 2)
	var bad *IngestResult
	go func() {
		_, err := e.Ingest(ctx, ingestJob(t, smallCSV(1000)))
		errs <- err
	}()
	go func() {
		res, err := e.Ingest(ctx, mallory())
		if err == nil || leaked(res, err) {
			bad = res
		}
		errs <- nil
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("an ordinary upload beside the refused one: %v", err)
		}
	}
	if bad != nil {
		t.Errorf("an upload linking to another's file, beside another upload: %+v; want it refused", bad)
	}

	// Without Landlock the link is followed: what refused it above is the
	// kernel, not something else about the link.
	open := mustEngine(t, Options{Threads: 1, NoLandlock: true})
	if res, err := open.Ingest(ctx, mallory()); !leaked(res, err) {
		t.Fatalf("without Landlock: %+v, %v; want the linked file read (the test's control)", res, err)
	}
}
