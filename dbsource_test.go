package datachat

import "testing"

func TestDBSourceAllows(t *testing.T) {
	for _, tc := range []struct {
		src  DBSource
		user string
		want bool
	}{
		{DBSource{Users: []string{"alice"}}, "alice", true},
		{DBSource{Users: []string{"alice"}}, "bob", false},
		{DBSource{Users: []string{}}, "alice", false},
		{DBSource{AllUsers: true}, "anyone", true},
	} {
		if got := tc.src.Allows(tc.user); got != tc.want {
			t.Errorf("%+v.Allows(%q): got %v, want %v", tc.src, tc.user, got, tc.want)
		}
	}
}
