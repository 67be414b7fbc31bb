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
// megabytes a second under load. Without withTrace, only the CPU and heap
// profiles are written: the trace and the mutex and block profiles nearly
// double the server's CPU under load, and skew the CPU profile towards what
// they record (every goroutine switch and wait).
func startProfile(dir string, withTrace bool) (stop func() error, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("DATACHAT_PROFILE_DIR: %w", err)
	}
	cf, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, fmt.Errorf("DATACHAT_PROFILE_DIR: %w", err)
	}
	var tf *os.File
	if withTrace {
		if tf, err = os.Create(filepath.Join(dir, "trace.out")); err != nil {
			cf.Close()
			return nil, fmt.Errorf("DATACHAT_PROFILE_DIR: %w", err)
		}
		if err := trace.Start(tf); err != nil {
			tf.Close()
			cf.Close()
			return nil, fmt.Errorf("DATACHAT_PROFILE_DIR: start trace: %w", err)
		}
	}
	if err := pprof.StartCPUProfile(cf); err != nil {
		if tf != nil {
			trace.Stop()
			tf.Close()
		}
		cf.Close()
		return nil, fmt.Errorf("DATACHAT_PROFILE_DIR: start CPU profile: %w", err)
	}
	profiles := []string{"heap"}
	if withTrace {
		runtime.SetMutexProfileFraction(1)
		runtime.SetBlockProfileRate(1)
		profiles = append(profiles, "mutex", "block")
	}
	return func() error {
		pprof.StopCPUProfile()
		errs := []error{cf.Close()}
		if tf != nil {
			trace.Stop()
			errs = append(errs, tf.Close())
		}
		for _, name := range profiles {
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
