package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"datachat"
)

func TestClassify(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("op: %w", &pgconn.PgError{Severity: "FATAL", Code: code}) }
	for _, tc := range []struct {
		name string
		err  error
		want error // nil: left as it is
	}{
		{"admin shutdown", pg(adminShutdown), datachat.ErrStoreUnavailable},
		{"crash shutdown", pg(crashShutdown), datachat.ErrStoreUnavailable},
		{"starting up", pg(cannotConnectNow), datachat.ErrStoreUnavailable},
		{"connection failure", pg("08006"), datachat.ErrStoreUnavailable},
		{"too many connections", pg(tooManyConnections), datachat.ErrStoreUnavailable},
		{"I/O error", pg(ioError), datachat.ErrStoreUnavailable},
		{"disk full", pg(diskFull), datachat.ErrNoSpace},
		{"unique violation", pg(uniqueViolation), nil},
		{"foreign key", pg(foreignKeyViolation), nil},
		{"syntax", pg("42601"), nil},
		{"conn closed", fmt.Errorf("op: %w", pgconn.ErrConnClosed), datachat.ErrStoreUnavailable},
		{"unexpected EOF", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), datachat.ErrStoreUnavailable},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, datachat.ErrStoreUnavailable},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), datachat.ErrStoreUnavailable},
		{"no rows", pgx.ErrNoRows, nil},
		{"cancelled", fmt.Errorf("op: %w", context.Canceled), nil},
		{"deadline", context.DeadlineExceeded, nil},
		{"other", errors.New("something else"), nil},
	} {
		got := classify(tc.err)
		switch {
		case tc.want == nil && got != tc.err:
			t.Errorf("%s: got %v, want the error unchanged", tc.name, got)
		case tc.want != nil && (!errors.Is(got, tc.want) || !errors.Is(got, tc.err) || datachat.ErrorCode(got) != datachat.EBUSY):
			t.Errorf("%s: got %v, want EBUSY with %v", tc.name, got, tc.want)
		}
	}
	if classify(nil) != nil {
		t.Error("classify(nil) is not nil")
	}
}
