package password

import (
	"regexp"
	"strings"
	"sync"
	"testing"

	"datachat"
)

// Known answers from the reference implementation (Debian's argon2 command,
// 0~20171227):
//
//	echo -n "correct horse battery staple" | argon2 saltsaltsaltsalt -id -t 2 -k 19456 -p 1 -l 32
//	echo -n "password" | argon2 somesalt -id -t 3 -k 64 -p 4 -l 32 -e
var reference = []struct{ pw, encoded string }{
	{"correct horse battery staple", "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$QKHrg5tayLGcN+Y0HVPNaBqykOVLUxlMkZycXE1uWRM"},
	{"password", "$argon2id$v=19$m=64,t=3,p=4$c29tZXNhbHQ$T4fNMJtyzPmC46C+DDai6FF5I8o+6vKMbvxnbQkvttU"},
}

func TestReference(t *testing.T) {
	for _, r := range reference {
		ok, err := Check(r.encoded, r.pw)
		if err != nil || !ok {
			t.Errorf("Check(%s, %q): %v, %v; want true", r.encoded, r.pw, ok, err)
		}
		if ok, _ := Check(r.encoded, r.pw+"x"); ok {
			t.Errorf("Check(%s) of a wrong password: true", r.encoded)
		}
		// Our encoding of the same parameters, salt and key is the
		// reference's, byte for byte.
		p, salt, key, err := decode(r.encoded)
		if err != nil {
			t.Fatal(err)
		}
		if got := encode(p, salt, idKey(r.pw, salt, p)); got != r.encoded {
			t.Errorf("encode: got %s, want %s", got, r.encoded)
		}
		if len(key) != 32 {
			t.Errorf("key length %d", len(key))
		}
	}
}

var phc = regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)

func TestHashAndCheck(t *testing.T) {
	const pw = "correct horse battery staple"
	h1, err := Hash(pw)
	if err != nil {
		t.Fatal(err)
	}
	if !phc.MatchString(h1) {
		t.Errorf("Hash: %q is not the PHC string of the current parameters", h1)
	}
	h2, err := Hash(pw)
	if err != nil {
		t.Fatal(err)
	}
	if h1 == h2 {
		t.Errorf("two hashes of one password are equal: no salt?")
	}
	for _, h := range []string{h1, h2} {
		if ok, err := Check(h, pw); err != nil || !ok {
			t.Errorf("Check of the right password: %v, %v", ok, err)
		}
	}
	for _, wrong := range []string{"", "correct horse battery stapl", "correct horse battery staple ", "Correct horse battery staple",
		"correct horse battery staple\x00", strings.Repeat("x", MaxBytes+1), "\xff" + pw} {
		if ok, err := Check(h1, wrong); err != nil || ok {
			t.Errorf("Check(%.40q): %v, %v; want false, nil", wrong, ok, err)
		}
	}
}

func TestUnicode(t *testing.T) {
	// "é" typed as one code point (NFC) or as e and a combining accent
	// (NFD) is one password.
	nfc := "mot de passe café crème"
	nfd := "mot de passe cafe\u0301 cre\u0300me"
	h, err := Hash(nfd)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := Check(h, nfc); err != nil || !ok {
		t.Errorf("Check of the NFC form of an NFD password: %v, %v", ok, err)
	}
	// Other look-alikes are not the same.
	if ok, _ := Check(h, "mot de passe cafe crème"); ok {
		t.Errorf("Check without the accent: true")
	}
	// Any Unicode text of 12 characters or more: 12 emoji, 12 CJK.
	for _, pw := range []string{strings.Repeat("🔑", 12), "東京都千代田区丸の内一丁目", "pass\tword\nwith\x01ctl"} {
		h, err := Hash(pw)
		if err != nil {
			t.Errorf("Hash(%q): %v", pw, err)
			continue
		}
		if ok, _ := Check(h, pw); !ok {
			t.Errorf("Check(%q): false", pw)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		pw   string
		want string // part of the message, "" for valid
	}{
		{"", "at least 12 characters"},
		{"elevenchars", "at least 12 characters"},
		{"twelve chars", ""},
		{strings.Repeat("é", 11), "at least 12 characters"},
		{strings.Repeat("é", 12), ""},                             // 12 characters, 24 bytes
		{strings.Repeat("e\u0301", 11), "at least 12 characters"}, // 22 code points, 11 characters
		{strings.Repeat("e\u0301", 12), ""},
		{strings.Repeat("a", MaxBytes), ""},
		{strings.Repeat("a", MaxBytes+1), "at most 1,024 bytes"},
		{strings.Repeat("é", MaxBytes/2+1), "at most 1,024 bytes"}, // 513 characters, 1,026 bytes
		{strings.Repeat("a", 20) + "\xff", "not valid UTF-8"},
		{strings.Repeat("a", 20) + "\xed\xa0\x80", "not valid UTF-8"}, // a surrogate
	} {
		err := Validate(tc.pw)
		if tc.want == "" {
			if err != nil {
				t.Errorf("Validate(%.30q): %v, want nil", tc.pw, err)
			}
			continue
		}
		if datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(datachat.ErrorMessage(err), tc.want) {
			t.Errorf("Validate(%.30q): %v, want EINVALID saying %q", tc.pw, err, tc.want)
		}
		if _, herr := Hash(tc.pw); datachat.ErrorCode(herr) != datachat.EINVALID {
			t.Errorf("Hash(%.30q): %v, want Validate's EINVALID", tc.pw, herr)
		}
	}
}

func TestCheckMalformed(t *testing.T) {
	good := reference[1].encoded // m=64,t=3,p=4
	salt, key := "c29tZXNhbHQ", "T4fNMJtyzPmC46C+DDai6FF5I8o+6vKMbvxnbQkvttU"
	for _, encoded := range []string{
		"",
		"password",
		"$argon2id$",
		strings.Replace(good, "argon2id", "argon2i", 1),
		strings.Replace(good, "argon2id", "ARGON2ID", 1),
		strings.Replace(good, "v=19", "v=16", 1),
		strings.Replace(good, "$v=19", "", 1),
		"$argon2id$v=19$m=64,t=3$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=3,p=4,x=1$" + salt + "$" + key,
		"$argon2id$v=19$m=64,m=64,t=3,p=4$" + salt + "$" + key,
		"$argon2id$v=19$m=064,t=3,p=4$" + salt + "$" + key,
		"$argon2id$v=19$m=+64,t=3,p=4$" + salt + "$" + key,
		"$argon2id$v=19$m=-64,t=3,p=4$" + salt + "$" + key,
		"$argon2id$v=19$m=0,t=3,p=4$" + salt + "$" + key,
		"$argon2id$v=19$m=31,t=3,p=4$" + salt + "$" + key,         // under 8 KiB a lane
		"$argon2id$v=19$m=4294967295,t=3,p=4$" + salt + "$" + key, // 4 TiB
		"$argon2id$v=19$m=2097152,t=3,p=4$" + salt + "$" + key,    // 2 GiB
		"$argon2id$v=19$m=64,t=0,p=4$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=1000000,p=4$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=3,p=0$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=3,p=255$" + salt + "$" + key,
		"$argon2id$v=19$m=64,t=3,p=4$" + salt + "=$" + key,                              // padded
		"$argon2id$v=19$m=64,t=3,p=4$" + salt + "$" + key + "=",                         // padded
		"$argon2id$v=19$m=64,t=3,p=4$" + salt + "$" + key[:20],                          // key too short
		"$argon2id$v=19$m=64,t=3,p=4$c29t$" + key,                                       // salt too short
		"$argon2id$v=19$m=64,t=3,p=4$" + salt + "$" + key + "$",                         // a field too many
		"$argon2id$v=19$m=64,t=3,p=4$" + salt + "$!" + key[1:],                          // not base64
		"$argon2id$v=19$m=64,t=3,p=4$" + salt + "$" + strings.ReplaceAll(key, "+", "-"), // URL alphabet
		" " + good,
	} {
		ok, err := Check(encoded, "password")
		if ok || err == nil {
			t.Errorf("Check(%q): %v, %v; want false and an error", encoded, ok, err)
		}
	}
}

func TestDummy(t *testing.T) {
	p, _, _, err := decode(dummyHash)
	if err != nil {
		t.Fatalf("dummyHash: %v", err)
	}
	if p != current {
		t.Errorf("dummyHash's parameters %+v, want the current %+v: make it again with them, so that a check against it costs what a real one does", p, current)
	}
	CheckDummy("correct horse battery staple")
	CheckDummy(strings.Repeat("x", 10*MaxBytes))
}

// TestConcurrent hashes and checks from more goroutines than there are
// slots: every one gets its answer.
func TestConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 3 * cap(slots) {
		wg.Go(func() {
			pw := strings.Repeat(string(rune('a'+i)), 12)
			h, err := Hash(pw)
			if err != nil {
				t.Error(err)
				return
			}
			if ok, err := Check(h, pw); !ok || err != nil {
				t.Errorf("Check: %v, %v", ok, err)
			}
		})
	}
	wg.Wait()
}

// BenchmarkHash measures one hash with the current parameters: the time a
// sign-in spends on its password.
func BenchmarkHash(b *testing.B) {
	for b.Loop() {
		if _, err := Hash("correct horse battery staple"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheck measures one check, and BenchmarkCheckDummy one check of
// an unknown name's sign-in: they should take the same time.
func BenchmarkCheck(b *testing.B) {
	h, err := Hash("correct horse battery staple")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		Check(h, "correct horse battery stapler")
	}
}

func BenchmarkCheckDummy(b *testing.B) {
	for b.Loop() {
		CheckDummy("correct horse battery stapler")
	}
}
