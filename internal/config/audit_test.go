package config

import (
	"strings"
	"testing"
)

func TestAuditDays(t *testing.T) {
	for _, tc := range []struct {
		val  string // "" for not set
		want int
		bad  bool
	}{
		{"", 365, false},
		{"0", 0, false},
		{"30", 30, false},
		{"3_650", 3650, false},
		{"36500", 36500, false},
		{"36501", 0, true},
		{"-1", 0, true},
		{"1y", 0, true},
		{"7d", 0, true},
		{"1.5", 0, true},
		{"99999999999999999999", 0, true},
	} {
		vars := map[string]string{}
		if tc.val != "" {
			vars["DATACHAT_AUDIT_DAYS"] = tc.val
		}
		c, err := Load("", env(vars))
		switch {
		case tc.bad && (err == nil || !strings.Contains(err.Error(), "DATACHAT_AUDIT_DAYS") || !strings.Contains(err.Error(), "keep audit events forever")):
			t.Errorf("DATACHAT_AUDIT_DAYS=%q: got %v, want an error naming it and what it accepts", tc.val, err)
		case !tc.bad && err != nil:
			t.Errorf("DATACHAT_AUDIT_DAYS=%q: %v", tc.val, err)
		case !tc.bad && c.AuditDays != tc.want:
			t.Errorf("DATACHAT_AUDIT_DAYS=%q: got %d, want %d", tc.val, c.AuditDays, tc.want)
		}
	}
}
