package llm

import "testing"

func TestFinishReason(t *testing.T) {
	reasons := map[string]string{"": FinishStop, "STOP": FinishStop, "MAX_TOKENS": FinishLength}
	for _, tc := range []struct {
		reason string
		called bool
		want   string
	}{
		{"", false, FinishStop},
		{"STOP", false, FinishStop},
		{"STOP", true, FinishToolCalls},
		{"MAX_TOKENS", false, FinishLength},
		{"OTHER_Reason", false, "other_reason"},
	} {
		if got := FinishReason(tc.reason, tc.called, reasons); got != tc.want {
			t.Errorf("FinishReason(%q, %v): got %q, want %q", tc.reason, tc.called, got, tc.want)
		}
	}
}
