package duckdb

import "syscall"

// workerSysProcAttr starts a worker in its own process group (a terminal's
// Ctrl-C reaches the server, which stops its workers itself) and kills it if
// the server dies first.
func workerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
