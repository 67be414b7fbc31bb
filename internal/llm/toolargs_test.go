package llm

import "testing"

func TestArgsObject(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		ok        bool
	}{
		{"", "{}", true},
		{" null\n", "{}", true},
		{` { "a" : [1, 2] } `, `{"a":[1,2]}`, true},
		{`[1]`, "", false},
		{`"{}"`, "", false},
		{`{"a":`, "", false},
		{`{} {}`, "", false},
	} {
		got, ok := ArgsObject([]byte(tc.raw))
		if string(got) != tc.want || ok != tc.ok {
			t.Errorf("ArgsObject(%q): got %s, %v, want %s, %v", tc.raw, got, ok, tc.want, tc.ok)
		}
	}
}

func TestToolParameters(t *testing.T) {
	if got, err := ToolParameters(nil); err != nil || string(got) != `{"type":"object","properties":{}}` {
		t.Errorf("none: got %s, %v", got, err)
	}
	if got, err := ToolParameters([]byte(`{"type":"object"}`)); err != nil || string(got) != `{"type":"object"}` {
		t.Errorf("object: got %s, %v", got, err)
	}
	if _, err := ToolParameters([]byte(`{`)); err == nil {
		t.Error("not JSON: no error")
	}
}
