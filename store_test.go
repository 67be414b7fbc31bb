package datachat

import (
	"errors"
	"testing"
	"time"
)

func TestAdmitTurn(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name          string
		streaming     []Lease
		wantInterrupt bool
		wantErr       error
	}{
		{"nothing streaming", nil, false, nil},
		{"no lease", []Lease{{}}, true, nil},
		{"lapsed", []Lease{{Owner: "a", Node: "n", Until: now.Add(-time.Second)}}, true, nil},
		{"lapses now", []Lease{{Owner: "a", Until: now}}, true, nil},
		{"live", []Lease{{Owner: "a", Until: now.Add(time.Microsecond)}}, false, ErrReplyInProgress},
		{"one live among lapsed", []Lease{{Until: now.Add(-time.Hour)}, {Owner: "b", Until: now.Add(time.Minute)}}, false, ErrReplyInProgress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			interrupt, err := AdmitTurn(tt.streaming, now)
			if interrupt != tt.wantInterrupt || !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, %v, want %v, %v", interrupt, err, tt.wantInterrupt, tt.wantErr)
			}
		})
	}
}
