//go:build !linux

package chromatest

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killTree(p *os.Process) { _ = p.Kill() }
