package mcpserver

import "testing"

func TestCheckMessage(t *testing.T) {
	for _, tc := range []struct {
		in   string
		code int
		id   string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, 0, ""},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0, ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, 0, ""}, // batches: the caller's
		{`not json`, -32700, "null"},
		{`{"jsonrpc":"2.0","id":1`, -32700, "null"},
		{"\x00", -32700, "null"},
		{`42`, -32600, "null"},
		{`"text"`, -32600, "null"},
		{`{}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"x"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":9,"method":["x"]}`, -32600, "9"},
		{`{"jsonrpc":"2.0","id":"q","method":1}`, -32600, `"q"`},
		{`{"jsonrpc":"3.0","id":2,"method":"x"}`, -32600, "2"},
	} {
		e := CheckMessage([]byte(tc.in))
		switch {
		case tc.code == 0 && e != nil:
			t.Errorf("%s: got %v, want none", tc.in, e)
		case tc.code != 0 && (e == nil || e.Code != tc.code):
			t.Errorf("%s: got %v, want code %d", tc.in, e, tc.code)
		case e != nil:
			want := `{"jsonrpc":"2.0","id":` + tc.id + `,"error":{"code":`
			if got := string(e.JSON()); len(got) < len(want) || got[:len(want)] != want {
				t.Errorf("%s: JSON %s, want it to start %s", tc.in, got, want)
			}
		}
	}
}
