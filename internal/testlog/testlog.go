// Package testlog holds what tests use to read a log while the code under
// test is still writing it.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a log that goroutines, a logger or a child process's output
// copier, write to while the test reads it. The zero value is empty and
// ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
