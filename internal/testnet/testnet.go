// Package testnet gives tests network addresses on the loopback interface.
package testnet

import (
	"net"
	"testing"
)

// ClosedAddr returns a loopback host:port nothing listens on (a port just
// freed), for a test of a connection refused.
func ClosedAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
