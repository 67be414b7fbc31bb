package dbsource

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"datachat"
)

// KeyFile is the name of the key file [LoadSecrets] creates in the data
// directory when DATACHAT_SECRET_KEY is not set.
const KeyFile = "secret.key"

// sealPrefix marks a sealed value and its format: AES-256-GCM, then base64url
// (no padding) of the 12-byte nonce followed by the ciphertext and tag.
const sealPrefix = "v1:"

// additional data bound into every sealed value, so a value sealed for
// something else with the same key does not open as a source URL.
var sealAD = []byte("datachat database source url v1")

// Secrets seals and opens source URLs (their credentials) with the server's
// key, AES-256-GCM from the standard library.
type Secrets struct {
	aead cipher.AEAD
	key  []byte
}

// NewSecrets returns Secrets for a 32-byte key.
func NewSecrets(key []byte) (*Secrets, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("secret key: want 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Secrets{aead: aead, key: key}, nil
}

// DeriveKey returns a 32-byte key for another use of the server's key (the
// sign-in flow's cookie, say), derived with HKDF-SHA256 and purpose, so
// that neither key tells anything of the other.
func (s *Secrets) DeriveKey(purpose string) []byte {
	k, err := hkdf.Key(sha256.New, s.key, nil, purpose, 32)
	if err != nil {
		panic(fmt.Sprintf("dbsource: derive a key: %v", err)) // only for a length HKDF cannot give
	}
	return k
}

// ParseKey decodes DATACHAT_SECRET_KEY's format: 32 random bytes in standard
// base64 with padding, 44 characters, as `openssl rand -base64 32` prints.
// Surrounding white space is ignored.
func ParseKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(key) != 32 {
		return nil, errors.New("want 32 bytes in standard base64, 44 characters (openssl rand -base64 32)")
	}
	return key, nil
}

// LoadSecrets returns the server's Secrets: the key of envKey (the value of
// DATACHAT_SECRET_KEY) when it is not empty, else the key in dataDir/secret.key,
// created with mode 0600 on first use. A key file that others may read or
// write is refused, as ssh refuses such a private key. created reports that
// the file was made now.
func LoadSecrets(envKey, dataDir string) (s *Secrets, created bool, err error) {
	if envKey != "" {
		key, err := ParseKey(envKey)
		if err != nil {
			return nil, false, datachat.Errorf(datachat.EINVALID, "DATACHAT_SECRET_KEY: %v", err)
		}
		s, err := NewSecrets(key)
		return s, false, err
	}
	p := filepath.Join(dataDir, KeyFile)
	key, err := readKeyFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		key = make([]byte, 32)
		rand.Read(key)
		err = writeKeyFile(p, key)
		if errors.Is(err, fs.ErrExist) { // another process made it first
			key, err = readKeyFile(p)
		} else if err == nil {
			created = true
		}
	}
	if err != nil {
		return nil, false, err
	}
	s, err = NewSecrets(key)
	return s, created, err
}

func readKeyFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secret key file %s has mode %v: others may read it; chmod 600 it", p, fi.Mode().Perm())
	}
	b := make([]byte, 256)
	n, err := f.Read(b)
	if err != nil {
		return nil, fmt.Errorf("read secret key file %s: %w", p, err)
	}
	key, err := ParseKey(string(b[:n]))
	if err != nil {
		return nil, fmt.Errorf("secret key file %s: %v", p, err)
	}
	return key, nil
}

func writeKeyFile(p string, key []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(p)
		return fmt.Errorf("write secret key file %s: %w", p, err)
	}
	return nil
}

// Seal encrypts a source URL for storage: "v1:" and base64url of a fresh
// nonce, the ciphertext and its tag.
func (s *Secrets) Seal(plain string) (string, error) {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	rand.Read(nonce)
	out := s.aead.Seal(nonce, nonce, []byte(plain), sealAD)
	return sealPrefix + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open decrypts what [Secrets.Seal] made. A value sealed with another key, or
// altered, is an error that says so (and nothing of the value).
func (s *Secrets) Open(sealed string) (string, error) {
	rest, ok := strings.CutPrefix(sealed, sealPrefix)
	if !ok {
		return "", errors.New("open sealed source URL: not a sealed value (want v1:…)")
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) < s.aead.NonceSize()+s.aead.Overhead() {
		return "", errors.New("open sealed source URL: malformed")
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, b[:n], b[n:], sealAD)
	if err != nil {
		return "", errors.New("open sealed source URL: wrong key or altered value (was DATACHAT_SECRET_KEY or secret.key changed?)")
	}
	return string(plain), nil
}
