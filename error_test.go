package datachat

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestConditions(t *testing.T) {
	cause := &os.PathError{Op: "write", Path: "/srv/data/datasets/.tmp/upload-1", Err: syscall.ENOSPC}
	for _, tc := range []struct {
		name  string
		err   error
		kind  error
		after time.Duration
		msg   string
	}{
		{"store", StoreUnavailable(errors.New("dial tcp 10.0.0.5:5432: connection refused")), ErrStoreUnavailable, StoreRetryAfter, "The database is unavailable; try again in a few seconds."},
		{"disk", NoSpace(cause), ErrNoSpace, NoSpaceRetryAfter, "The server is out of disk space; nothing new can be stored until space is freed."},
		{"disk, wrapped", fmt.Errorf("store dataset: %w", ClassifyNoSpace(fmt.Errorf("spool: %w", cause))), ErrNoSpace, NoSpaceRetryAfter, "The server is out of disk space; nothing new can be stored until space is freed."},
		{"classified once", StoreUnavailable(NoSpace(cause)), ErrNoSpace, NoSpaceRetryAfter, "The server is out of disk space; nothing new can be stored until space is freed."},
	} {
		var c *Condition
		var ra interface{ RetryAfter() time.Duration }
		switch {
		case ErrorCode(tc.err) != EBUSY:
			t.Errorf("%s: code %s, want busy", tc.name, ErrorCode(tc.err))
		case !errors.Is(tc.err, tc.kind) || !errors.As(tc.err, &c) || c.Reason == "" || c.SuggestedAction == "":
			t.Errorf("%s: %v lacks its condition", tc.name, tc.err)
		case !errors.As(tc.err, &ra) || ra.RetryAfter() != tc.after:
			t.Errorf("%s: RetryAfter: want %s", tc.name, tc.after)
		case ErrorMessage(tc.err) != tc.msg:
			t.Errorf("%s: message %q, want %q", tc.name, ErrorMessage(tc.err), tc.msg)
		}
	}
	if err := NoSpace(cause); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("the cause is not in the chain of %v", err)
	}
	for _, err := range []error{nil, errors.New("x"), &os.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}} {
		if IsNoSpace(err) || ClassifyNoSpace(err) != err {
			t.Errorf("%v is taken for a full disk", err)
		}
	}
	if !IsNoSpace(&os.PathError{Op: "write", Path: "/x", Err: syscall.EDQUOT}) {
		t.Error("EDQUOT is not a full disk")
	}
}

func TestRetryAfter(t *testing.T) {
	limit := &Error{Code: ERATELIMIT, Message: "Too many turns.", RetryAfter: 3 * time.Second}
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration
		ok   bool
	}{
		{"rate limit", limit, 3 * time.Second, true},
		{"rate limit, wrapped", fmt.Errorf("admit: %w", limit), 3 * time.Second, true},
		{"rate limit, joined", errors.Join(errors.New("close"), limit), 3 * time.Second, true},
		{"condition", StoreUnavailable(errors.New("connection refused")), StoreRetryAfter, true},
		{"no wait", Errorf(ENOTFOUND, "Conversation not found."), 0, false},
		{"nil", nil, 0, false},
	} {
		if got, ok := RetryAfter(tc.err); got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
