package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"datachat/internal/scratch"
)

// Temporary files — uploads being spooled and converted, the SQL workers'
// directories, documents being read — are written by each process in a
// directory of its own (internal/scratch) under these parents of the data
// directory, which several processes may share. At start and every
// tempSweepInterval, each process removes the directories of processes that
// are gone (killed, crashed), never a live one's.

// tempSweepInterval is how often a process sweeps what others left, and
// marks its own directories in use (well within scratch.RemoteStale).
const tempSweepInterval = 5 * time.Minute

// tempParent is a directory where processes keep their temporary files, with
// the names earlier releases gave their files there (removed once an hour
// old).
type tempParent struct {
	dir    string
	legacy []string
}

// tempParents are the data directory's temporary directories: tmp/ (SQL
// workers, documents being read, the space reserved for deletes) and
// datasets/.tmp/ (uploads, on the datasets' file system so that a converted
// file is moved into place), and the system's, where documents were spooled
// before.
func tempParents(dataDir string) (tmp, datasets tempParent, all []tempParent) {
	tmp = tempParent{dir: filepath.Join(dataDir, "tmp"), legacy: []string{"sql-*"}}
	datasets = tempParent{dir: filepath.Join(dataDir, "datasets", ".tmp"), legacy: []string{"upload-*", strings.Repeat("[0-9a-f]", 24)}}
	system := tempParent{dir: os.TempDir(), legacy: []string{"datachat-upload-*"}}
	return tmp, datasets, []tempParent{tmp, datasets, system}
}

// sweepTemp removes what processes that are gone left in parents, and logs
// what it removed.
func (m *Main) sweepTemp(parents []tempParent) {
	var total scratch.Swept
	for _, p := range parents {
		sw, err := scratch.Sweep(p.dir, p.legacy...)
		if err != nil {
			m.Logger.Warn("remove temporary files left by processes that are gone", slog.String("dir", p.dir), slog.String("error", err.Error()))
		}
		total.Dirs += sw.Dirs
		total.Other += sw.Other
		total.Bytes += sw.Bytes
	}
	if total.Dirs > 0 || total.Other > 0 {
		m.Logger.Warn("temporary files left by processes that are gone removed",
			slog.Int("process_dirs", total.Dirs), slog.Int("older_files", total.Other), slog.Int64("bytes", total.Bytes))
	}
}

// sweepTempEvery sweeps parents every tempSweepInterval, marks this
// process's own directories as in use (for sweeps on other hosts sharing the
// data directory), and holds the reserve for deletes (if any) again once the
// disk has room; it returns the function that stops it.
func (m *Main) sweepTempEvery(parents []tempParent, own []*scratch.Dir, reserve *scratch.Reserve) func() error {
	return every(tempSweepInterval, func(context.Context) {
		for _, d := range own {
			if err := d.Touch(); err != nil {
				m.Logger.Warn("mark temporary directory in use", slog.String("dir", d.Path()), slog.String("error", err.Error()))
			}
		}
		m.sweepTemp(parents)
		if reserve == nil {
			return
		}
		if before := reserve.HeldBytes(); before < scratch.DefaultReserve {
			if reserve.Hold(); reserve.HeldBytes() > before {
				m.Logger.Info("disk space for deletes held again", slog.Int64("bytes", reserve.HeldBytes()))
			}
		}
	})
}
