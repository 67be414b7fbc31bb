// Package scratch gives each process a directory of its own for temporary
// files — uploads being spooled, datasets being converted, the SQL workers'
// directories, documents being read — under a parent that several processes
// may share (one data directory behind a load balancer), and removes the
// directories of processes that are gone.
//
// A process holds its directory by an exclusive lock (flock) on a file in it,
// for as long as it lives: the kernel releases the lock when the process
// ends, SIGKILL included. [Sweep] removes a directory whose lock it can take,
// so it never removes what a live process is writing, and it removes what a
// killed one left at once. A directory of a process on another host (the
// lock file names the host) is removed only once its lock file has not been
// touched for [RemoteStale] as well: a shared file system may not carry
// locks between hosts (NFS mounted with nolock), and the owner touches its
// file ([Dir.Touch]) while it lives.
package scratch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const (
	prefix   = "proc-"
	lockName = ".lock"
)

// Dir is a process's own directory under a shared parent.
type Dir struct {
	path string
	lock *os.File
}

// Claim creates a directory of this process's own under parent (created if
// needed) and locks it for the life of the process, or until Release.
func Claim(parent string) (*Dir, error) {
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, fmt.Errorf("create temporary directory: %w", err)
	}
	var last error
	for range 10 {
		b := make([]byte, 6)
		rand.Read(b)
		path := filepath.Join(parent, fmt.Sprintf("%s%d-%s", prefix, os.Getpid(), hex.EncodeToString(b)))
		if err := os.Mkdir(path, 0o700); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return nil, fmt.Errorf("create temporary directory: %w", err)
		}
		d, err := hold(path)
		if err == nil {
			// Who holds it, for a sweep on another host.
			if _, err := fmt.Fprintf(d.lock, "%s %d\n", hostname(), os.Getpid()); err != nil {
				d.Release()
				return nil, fmt.Errorf("create temporary directory: %w", err)
			}
			return d, nil
		}
		last = err
		// A sweep running at this instant took the directory for a dead
		// process's (it has no lock yet): try another.
	}
	return nil, fmt.Errorf("claim a temporary directory in %s: %w", parent, last)
}

// hold locks the lock file of the directory at path, and checks that the
// file locked is still the one there: a sweep may have removed the directory
// between its creation and the lock.
func hold(path string) (*Dir, error) {
	lockPath := filepath.Join(path, lockName)
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if ok, err := tryLock(f); canLock && (err != nil || !ok) {
		f.Close()
		if err == nil {
			err = errors.New("locked by a sweep")
		}
		return nil, err
	}
	held, err := f.Stat()
	if err == nil {
		var there os.FileInfo
		if there, err = os.Stat(lockPath); err == nil && !os.SameFile(held, there) {
			err = errors.New("replaced")
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Dir{path: path, lock: f}, nil
}

// Path is the directory.
func (d *Dir) Path() string { return d.path }

// Touch marks the directory as still in use, for sweeps on other hosts:
// call it more often than RemoteStale.
func (d *Dir) Touch() error {
	now := time.Now()
	return os.Chtimes(filepath.Join(d.path, lockName), now, now)
}

// RemoteStale is how long the lock file of a directory of a process on
// another host must have gone untouched for a sweep to remove it.
const RemoteStale = 15 * time.Minute

// hostname names this host in lock files.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return strings.Fields(h)[0]
}

// Release removes the directory with everything in it and gives up the lock.
func (d *Dir) Release() error {
	err := os.RemoveAll(d.path)
	d.lock.Close()
	return err
}

// Swept is what a Sweep removed.
type Swept struct {
	Dirs  int   // directories of processes that are gone
	Other int   // leftovers of earlier releases (legacy patterns)
	Bytes int64 // their size
}

// lockGrace is how old a process directory without a lock file must be to
// be removed: it is created an instant before its lock.
const lockGrace = time.Minute

// legacyGrace is how old a leftover matching a legacy pattern must be to be
// removed: files of a process of an earlier release, which holds no lock,
// may still be in use while it runs beside this one during an upgrade.
const legacyGrace = time.Hour

// Sweep removes, under parent, the directories of processes that are gone —
// those whose lock it can take — and the entries matching legacy (patterns
// of filepath.Match, for files earlier releases left there without a
// process directory) that were last modified more than an hour ago. It never
// removes this process's own directories, nor another live process's.
func Sweep(parent string, legacy ...string) (Swept, error) {
	var sw Swept
	entries, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return sw, nil
	}
	if err != nil {
		return sw, err
	}
	var errs []error
	for _, e := range entries {
		path := filepath.Join(parent, e.Name())
		switch {
		case e.IsDir() && strings.HasPrefix(e.Name(), prefix):
			n, ok, err := sweepDir(path)
			if err != nil {
				errs = append(errs, err)
			}
			if ok {
				sw.Dirs++
				sw.Bytes += n
			}
		case matchAny(legacy, e.Name()):
			fi, err := e.Info()
			if err != nil || time.Since(fi.ModTime()) < legacyGrace {
				continue
			}
			n := size(path)
			if err := os.RemoveAll(path); err != nil {
				errs = append(errs, err)
				continue
			}
			sw.Other++
			sw.Bytes += n
		}
	}
	return sw, errors.Join(errs...)
}

// sweepDir removes a process directory unless its process is alive.
func sweepDir(path string) (bytes int64, removed bool, err error) {
	if !canLock {
		return 0, false, nil // whether its process lives cannot be told
	}
	f, err := os.OpenFile(filepath.Join(path, lockName), os.O_RDWR, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// No lock file: its process died between creating it and locking
		// it, or is creating the lock file this instant — a removal would
		// race with that, so only an old one goes.
		fi, err := os.Stat(path)
		if err != nil || time.Since(fi.ModTime()) < lockGrace {
			return 0, false, nil
		}
	case err != nil:
		return 0, false, err
	default:
		defer f.Close()
		ok, err := tryLock(f)
		if err != nil || !ok {
			return 0, false, err // alive (or the lock cannot be told)
		}
		if !gone(f) {
			return 0, false, nil
		}
	}
	n := size(path)
	if err := os.RemoveAll(path); err != nil {
		return 0, false, err
	}
	return n, true, nil
}

// gone reports whether the process whose lock file f is (its lock just
// taken) is gone: one of this host, whose lock the kernel released; one of
// another host, whose file has not been touched for RemoteStale either; one
// that died before it wrote its name, after lockGrace.
func gone(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	b := make([]byte, 512)
	n, _ := f.ReadAt(b, 0)
	fields := strings.Fields(string(b[:n]))
	switch {
	case len(fields) == 0:
		return time.Since(fi.ModTime()) >= lockGrace
	case fields[0] == hostname():
		return true
	}
	return time.Since(fi.ModTime()) >= RemoteStale
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := filepath.Match(p, name); ok {
			return true
		}
	}
	return false
}

// size is the size of the files under path.
func size(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
