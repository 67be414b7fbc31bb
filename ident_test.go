package datachat

import "testing"

func TestIdent(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"species", "species"},
		{"x2", "x2"},
		{"_a", "_a"},
		{"Species", `"Species"`},
		{"body mass", `"body mass"`},
		{"2nd", `"2nd"`},
		{"", `""`},
		{`a"b`, `"a""b"`},
		{"select", `"select"`}, // reserved
		{"map", `"map"`},       // a type_function keyword only
	} {
		if got := Ident(c.in); got != c.want {
			t.Errorf("Ident(%q): got %s, want %s", c.in, got, c.want)
		}
	}
	if got, want := QuoteIdent(`a"b`), `"a""b"`; got != want {
		t.Errorf("QuoteIdent: got %s, want %s", got, want)
	}
	if got, want := QuoteMySQLIdent("a`b c"), "`a``b c`"; got != want {
		t.Errorf("QuoteMySQLIdent: got %s, want %s", got, want)
	}
	if got, want := QuoteLiteral("it's"), `'it''s'`; got != want {
		t.Errorf("QuoteLiteral: got %s, want %s", got, want)
	}
}
