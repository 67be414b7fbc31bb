package sso

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// flow is what a sign-in carries from Login to Callback, sealed in a cookie.
type flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"` // PKCE code verifier
	Expires  int64  `json:"e"` // Unix seconds; the cookie's Max-Age is the browser's to honour, this is ours
}

// flowCookieName is the cookie; its Path is CallbackPath, so no other
// request carries it.
const flowCookieName = "datachat_oidc_flow"

// flowAD is bound into every sealed flow (with a key derived for this use
// alone), so nothing else sealed with the server's key opens as a flow.
var flowAD = []byte("datachat oidc flow v1")

// newSealer derives the flow cookie's AES-256-GCM key from the server's key.
func newSealer(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("sso: Key: want 32 bytes, got %d", len(key))
	}
	k, err := hkdf.Key(sha256.New, key, nil, "datachat oidc flow cookie", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// seal returns f encrypted and authenticated: base64url of a fresh nonce,
// the ciphertext and its tag.
func (h *Handler) seal(f flow) string {
	plain, _ := json.Marshal(f)
	nonce := make([]byte, h.aead.NonceSize())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(h.aead.Seal(nonce, nonce, plain, flowAD))
}

// openFlow reads the request's flow cookie: present, sealed by this
// server's key, and not expired.
func (h *Handler) openFlow(r *http.Request) (flow, error) {
	var f flow
	c, err := r.Cookie(flowCookieName)
	if err != nil {
		return f, errors.New("no flow cookie")
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	n := h.aead.NonceSize()
	if err != nil || len(b) < n+h.aead.Overhead() {
		return f, errors.New("the flow cookie is malformed")
	}
	plain, err := h.aead.Open(nil, b[:n], b[n:], flowAD)
	if err != nil {
		return f, errors.New("the flow cookie was not sealed by this server's key, or was altered")
	}
	if err := json.Unmarshal(plain, &f); err != nil || f.State == "" || f.Verifier == "" {
		return flow{}, errors.New("the flow cookie holds no flow")
	}
	if now := h.c.Now().Unix(); now >= f.Expires {
		return flow{}, fmt.Errorf("the flow expired %d s ago", now-f.Expires)
	}
	return f, nil
}

// flowCookie is the flow cookie with value; maxAge < 0 deletes it.
func (h *Handler) flowCookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name:     flowCookieName,
		Value:    value,
		Path:     CallbackPath,
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   h.secure,
		SameSite: http.SameSiteLaxMode, // the provider's redirect back is a top-level GET: Lax sends it
	}
}

// maxUsedStates bounds the states remembered: at 40 bytes or so each, about
// 2 MB. Filling it takes 50,000 callbacks with valid flow cookies within
// flowTTL; then sign-ins are refused (msgBusy) until the oldest expire,
// rather than a state being forgotten early and usable again.
const maxUsedStates = 50_000

var (
	errStateUsed = errors.New("the flow's state was used already")
	errStateFull = errors.New("too many sign-ins within the flow's lifetime: the set of used states is full")
)

// usedStates remembers the states of finished callbacks until their flows
// expire, so that a flow cookie replayed with its callback URL (copied from a
// browser, a proxy's log, a history) is refused even while the cookie is
// still valid.
//
// It lives in this process's memory: with several server processes behind
// one address, each has its own set and a replay that reaches another
// process is not caught here, nor one after a restart. The provider's
// single use of each code still refuses such a replay (OAuth 2.0 requires
// it), and PKCE ties the code to this flow's verifier; a set shared through
// the store would close that gap.
type usedStates struct {
	mu   sync.Mutex
	max  int
	exp  map[string]int64 // state → when its flow expires, Unix seconds
	next int64            // when to forget expired states next
}

// sweepEvery spaces the sweeps of expired states, so that a full set does
// not cost a walk of every entry per refused callback.
const sweepEvery = 30

func newUsedStates(max int) *usedStates {
	return &usedStates{max: max, exp: make(map[string]int64)}
}

// add records state, whose flow expires at exp, as used. It returns
// errStateUsed when state was recorded already, errStateFull when the set
// holds max states that have not expired (or expired less than sweepEvery
// seconds ago).
func (u *usedStates) add(state string, exp, now int64) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if now >= u.next {
		// Forget expired states: their cookies no longer open.
		u.next = now + sweepEvery
		for s, e := range u.exp {
			if e <= now {
				delete(u.exp, s)
			}
		}
	}
	if _, ok := u.exp[state]; ok {
		return errStateUsed
	}
	if len(u.exp) >= u.max {
		return errStateFull
	}
	u.exp[state] = exp
	return nil
}
