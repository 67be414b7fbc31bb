package datachat

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// NewAPIKeySecret returns a new random API key, the hash to store for it, and a
// short prefix that identifies it in listings without revealing it.
func NewAPIKeySecret() (secret, hash, prefix string) {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	secret = "dck_" + base64.RawURLEncoding.EncodeToString(b)
	return secret, HashAPIKey(secret), secret[:10]
}

// HashAPIKey returns the stored form of an API key: its SHA-256, hex encoded.
// Keys are 256 random bits, so a fast hash is enough.
func HashAPIKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
