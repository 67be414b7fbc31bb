package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// startProfile records how serve spends its time, for diagnosing latency
// under load (BENCHMARKS.md, "Token latency"). With DATACHAT_PROFILE_DIR set,
// serve writes an execution trace (trace.out) and a CPU profile (cpu.pprof)
// of its whole run to that directory, and, when it stops, its heap, mutex and
// block profiles (heap.pprof, mutex.pprof, block.pprof: every contention and
// every wait). Off unless set: it slows serve down, and the trace grows by
// megabytes a second under load.
func startProfile(dir string) (stop func() error, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("DATACHAT_PROFILE_DIR: %w", err)
	}
	tf, err := os.Create(filepath.Join(dir, "trace.out"))
	if err != nil {
		return nil, fmt.Errorf("DATACHAT_PROFILE_DIR: %w", err)
	}
	cf, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		tf.Close()
		return nil, fmt.Errorf("DATACHAT_PROFILE_DIR: %w", err)
	}
	if err := trace.Start(tf); err != nil {
		tf.Close()
		cf.Close()
		return nil, fmt.Errorf("DATACHAT_PROFILE_DIR: start trace: %w", err)
	}
	if err := pprof.StartCPUProfile(cf); err != nil {
		trace.Stop()
		tf.Close()
		cf.Close()
		return nil, fmt.Errorf("DATACHAT_PROFILE_DIR: start CPU profile: %w", err)
	}
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(1)
	return func() error {
		pprof.StopCPUProfile()
		trace.Stop()
		errs := []error{tf.Close(), cf.Close()}
		for _, name := range []string{"heap", "mutex", "block"} {
			f, err := os.Create(filepath.Join(dir, name+".pprof"))
			if err != nil {
				errs = append(errs, fmt.Errorf("DATACHAT_PROFILE_DIR: %w", err))
				continue
			}
			errs = append(errs, pprof.Lookup(name).WriteTo(f, 0), f.Close())
		}
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
		return errors.Join(errs...)
	}, nil
}
