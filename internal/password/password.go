// Package password hashes and checks the passwords people sign in with:
// argon2id (golang.org/x/crypto/argon2, RFC 9106), stored as a PHC string
// that names its parameters and salt, so that a later change of the
// parameters still checks the passwords hashed before it.
//
//	$argon2id$v=19$m=19456,t=2,p=1$<salt>$<key>
//
// (salt and key in unpadded standard base64, as the reference
// implementation writes it). The parameters are OWASP's first choice for
// argon2id: 19 MiB, two passes, one lane — 21 to 35 ms a hash, 19 MiB
// allocated, on a 2-core AMD EPYC VM (go test -bench Hash -benchtime 50x
// -count 3). At most one hash a core runs at once (more wait), so that a
// burst of sign-ins costs time, not memory: 19 MiB a core at most.
//
// Passwords are Unicode text, compared in normalisation form C, so that the
// same characters typed on two keyboards (é as one code point or as e and
// an accent) are the same password.
package password

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
	"golang.org/x/text/unicode/norm"

	"datachat"
)

// Bounds of a password, as [Validate] checks them: at least MinChars
// characters, at most MaxBytes bytes of UTF-8.
const (
	MinChars = 12
	MaxBytes = 1024
)

// params are argon2id's parameters: memory in KiB, passes, lanes, and the
// lengths of the salt and of the key.
type params struct {
	memory  uint32
	time    uint32
	threads uint8
	saltLen int
	keyLen  int
}

// current are the parameters of new hashes.
var current = params{memory: 19 * 1024, time: 2, threads: 1, saltLen: 16, keyLen: 32}

// Bounds of the parameters [Check] accepts from a stored hash: a corrupt or
// planted hash must not make a check take minutes or gigabytes.
const (
	maxMemory  = 1 << 20 // 1 GiB
	maxTime    = 16
	maxThreads = 16
)

// slots bounds how many hashes run at once: one a core.
var slots = make(chan struct{}, runtime.GOMAXPROCS(0))

// idKey is argon2.IDKey run in a slot.
func idKey(pw string, salt []byte, p params) []byte {
	slots <- struct{}{}
	defer func() { <-slots }()
	return argon2.IDKey([]byte(norm.NFC.String(pw)), salt, p.time, p.memory, p.threads, uint32(p.keyLen))
}

// Validate refuses (EINVALID) a password that may not be set, saying the
// rule: fewer than MinChars characters, more than MaxBytes bytes, or not
// UTF-8 text.
func Validate(pw string) error {
	switch {
	case !utf8.ValidString(pw):
		return datachat.Errorf(datachat.EINVALID, "The password is not valid UTF-8 text: type it again, or choose another.")
	case len(pw) > MaxBytes:
		return datachat.Errorf(datachat.EINVALID, "The password is too long: use at most 1,024 bytes (and at least %d characters).", MinChars)
	case utf8.RuneCountInString(norm.NFC.String(pw)) < MinChars:
		return datachat.Errorf(datachat.EINVALID, "The password is too short: use at least %d characters.", MinChars)
	}
	return nil
}

// Hash returns the stored form of pw, with a new random salt; pw must pass
// [Validate], whose error it returns otherwise.
func Hash(pw string) (string, error) {
	if err := Validate(pw); err != nil {
		return "", err
	}
	p := current
	salt := make([]byte, p.saltLen)
	rand.Read(salt) // never fails (crypto/rand)
	return encode(p, salt, idKey(pw, salt, p)), nil
}

func encode(p params, salt, key []byte) string {
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.memory, p.time, p.threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// errFormat is the error of a stored hash Check cannot read.
var errFormat = errors.New("password: the stored hash is not an argon2id PHC string this server can check")

// decode reads a PHC string made by [Hash] (any parameters within bounds).
func decode(encoded string) (params, []byte, []byte, error) {
	var p params
	f := strings.Split(encoded, "$")
	if len(f) != 6 || f[0] != "" || f[1] != "argon2id" || f[2] != "v="+strconv.Itoa(argon2.Version) {
		return p, nil, nil, errFormat
	}
	var seen [3]bool
	for _, kv := range strings.Split(f[3], ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || v != strconv.FormatUint(n, 10) {
			return p, nil, nil, errFormat
		}
		switch {
		case k == "m" && !seen[0] && n >= 8 && n <= maxMemory:
			p.memory, seen[0] = uint32(n), true
		case k == "t" && !seen[1] && n >= 1 && n <= maxTime:
			p.time, seen[1] = uint32(n), true
		case k == "p" && !seen[2] && n >= 1 && n <= maxThreads:
			p.threads, seen[2] = uint8(n), true
		default:
			return p, nil, nil, errFormat
		}
	}
	if seen != [3]bool{true, true, true} || p.memory < 8*uint32(p.threads) {
		return p, nil, nil, errFormat
	}
	salt, err1 := base64.RawStdEncoding.Strict().DecodeString(f[4])
	key, err2 := base64.RawStdEncoding.Strict().DecodeString(f[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(salt) > 64 || len(key) < 16 || len(key) > 64 {
		return p, nil, nil, errFormat
	}
	p.saltLen, p.keyLen = len(salt), len(key)
	return p, salt, key, nil
}

// Check reports whether pw is the password of encoded, a hash made by
// [Hash], comparing in constant time. A password Validate refuses for
// being over MaxBytes or not UTF-8 is never right (and not hashed: no
// password that long can have been set); err is for a hash it cannot read.
func Check(encoded, pw string) (ok bool, err error) {
	p, salt, key, err := decode(encoded)
	if err != nil {
		return false, err
	}
	if len(pw) > MaxBytes || !utf8.ValidString(pw) {
		return false, nil
	}
	return subtle.ConstantTimeCompare(idKey(pw, salt, p), key) == 1, nil
}

// dummyHash is the hash CheckDummy checks against: of a random password
// that was thrown away, with the current parameters (a test holds it to
// them), made once rather than at the first sign-in of an unknown name,
// which would then take two hashes' time.
const dummyHash = "$argon2id$v=19$m=19456,t=2,p=1$efioyII7Ax9rYR9+ycMHnA$Z2kBqKJRapbu+asBwNEc/+TkdzTO93kYplklX0NPt00"

// CheckDummy spends the time of a [Check] on pw and forgets the outcome: a
// sign-in as a user who does not exist, or has no password, takes as long
// as one with a wrong password, so that its time does not say which names
// exist.
func CheckDummy(pw string) {
	Check(dummyHash, pw)
}
