//go:build !linux

package duckdb

import "syscall"

// workerSysProcAttr starts a worker in its own process group.
func workerSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
