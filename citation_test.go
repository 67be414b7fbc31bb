package datachat

import "testing"

func TestSourceCitation(t *testing.T) {
	for _, tc := range []struct {
		meta map[string]any
		want string
	}{
		{map[string]any{"document": "report.pdf", "page": 4.0}, "report.pdf, page 4"},
		{map[string]any{"document": "report.pdf", "page": 4}, "report.pdf, page 4"},
		{map[string]any{"document": "notes.md", "page": 0.0, "section": "Setup"}, `notes.md, section "Setup"`},
		{map[string]any{"document": "notes.md"}, "notes.md"},
		{nil, "document"},
	} {
		if got := (Source{Metadata: tc.meta}).Citation(); got != tc.want {
			t.Errorf("Citation of %v: got %q, want %q", tc.meta, got, tc.want)
		}
	}
}
