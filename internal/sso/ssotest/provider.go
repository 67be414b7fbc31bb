// Package ssotest is an OpenID Connect provider for tests, on 127.0.0.1:
// a discovery document, a JWKS (RSA keys, through go-jose), /authorize that
// signs in the configured [User] at once and redirects back with a code, and
// /token that authenticates the client and checks the code (known, unused,
// issued to that client), its redirect_uri and the PKCE verifier before it
// answers with a signed ID token. [Misbehavior] makes it answer as a broken
// or hostile provider would, for the tests of what a relying party refuses.
//
// A test starts one, registers the server's client and signs in:
//
//	p := ssotest.Start(t)
//	p.AddClient(ssotest.Client{ID: "datachat", Secret: "s", RedirectURIs: []string{srv.URL + sso.CallbackPath}})
//	p.SetUser(ssotest.User{Subject: "u1", Email: "ann@example.com", EmailVerified: true, Groups: []string{"admins"}})
//	// DATACHAT_OIDC_ISSUER=p.URL; a browser (or an http.Client with a
//	// cookie jar) following redirects from the login path signs in as u1.
//	p.Misbehave(ssotest.Misbehavior{Expired: true}) // the next ID tokens are expired
package ssotest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Provider is a running OpenID Connect provider. Its methods are safe for
// concurrent use.
type Provider struct {
	URL string // the issuer, http://127.0.0.1:PORT

	srv *httptest.Server

	mu            sync.Mutex
	key           *rsa.PrivateKey // signs ID tokens; the JWKS publishes its public half
	kid           string
	clients       map[string]Client
	user          User
	bad           Misbehavior
	authMethods   []string
	codes         map[string]*grant
	tokenRequests int
}

// Client is a relying party registered with the provider.
type Client struct {
	ID           string
	Secret       string
	RedirectURIs []string // exact matches only
}

// User is the person /authorize signs in. Empty strings and a nil Groups
// leave their claims out.
type User struct {
	Subject           string
	Email             string
	EmailVerified     bool
	Name              string
	PreferredUsername string
	Groups            []string
	// Claims are set in the ID token after the fields above; a nil value
	// removes a claim (Claims{"email_verified": nil}).
	Claims map[string]any
}

// Misbehavior makes the provider answer wrongly. The zero value behaves.
type Misbehavior struct {
	Issuer   string   // the ID token's iss instead of the provider's URL
	Audience []string // the ID token's aud instead of the client's ID
	AZP      string   // an azp claim
	Nonce    string   // the ID token's nonce instead of the one the client sent
	Expired  bool     // the ID token expired a minute ago

	Unsigned   bool // "alg": "none", no signature
	UnknownKey bool // signed by an RSA key the JWKS does not hold, under the published key's kid
	HMAC       bool // HS256 with the published public key (PEM) as the secret: the algorithm-confusion attack

	NoIDToken       bool   // the token response has no id_token
	TokenError      string // /token answers 400 with this OAuth error
	AuthorizeError  string // /authorize redirects back with ?error=THIS (e.g. access_denied)
	AuthorizeIssuer string // the iss parameter of the authorization response (RFC 9207)
	Unavailable     bool   // every endpoint answers 503
}

type grant struct {
	client, redirectURI, challenge, nonce string
	user                                  User
	expires                               time.Time
	used                                  bool
}

// DefaultUser is the user a new Provider signs in.
var DefaultUser = User{
	Subject:           "248289761001",
	Email:             "alice@example.com",
	EmailVerified:     true,
	Name:              "Alice Example",
	PreferredUsername: "alice",
}

// Start starts a provider on 127.0.0.1 that signs in [DefaultUser] and has
// no clients; it stops when the test ends.
func Start(t testing.TB) *Provider {
	t.Helper()
	p := &Provider{
		key:         firstKey(),
		kid:         rand.Text(),
		clients:     map[string]Client{},
		user:        DefaultUser,
		authMethods: []string{"client_secret_basic", "client_secret_post"},
		codes:       map[string]*grant{},
	}
	p.srv = httptest.NewServer(p)
	p.URL = p.srv.URL
	t.Cleanup(p.Close)
	return p
}

// RSA key generation takes up to seconds under -race, so the providers of
// one test process share their first signing key, under different key IDs:
// a token signed by one names a key the others do not publish.
// Misbehavior.UnknownKey signs with foreignKey, which no provider publishes.
var (
	firstKey   = sync.OnceValue(newKey)
	foreignKey = sync.OnceValue(newKey)
)

func newKey() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(fmt.Sprintf("ssotest: %v", err))
	}
	return k
}

// Close stops the provider: connections to it are refused from then on.
func (p *Provider) Close() { p.srv.Close() }

// AddClient registers (or replaces) a client.
func (p *Provider) AddClient(c Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clients[c.ID] = c
}

// SetUser sets who the next /authorize signs in; a code already issued keeps
// its user.
func (p *Provider) SetUser(u User) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.user = u
}

// Misbehave sets how the provider misbehaves from now on; Misbehavior{}
// makes it behave again.
func (p *Provider) Misbehave(m Misbehavior) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bad = m
}

// RotateKey replaces the signing key with a new one; the JWKS publishes
// only the new one.
func (p *Provider) RotateKey() {
	k := newKey()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.key, p.kid = k, rand.Text()
}

// SetAuthMethods sets the client authentication methods /token accepts and
// discovery announces: client_secret_basic, client_secret_post.
func (p *Provider) SetAuthMethods(methods ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.authMethods = methods
}

// TokenRequests returns how many requests /token has had.
func (p *Provider) TokenRequests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tokenRequests
}

func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	down := p.bad.Unavailable
	p.mu.Unlock()
	if down {
		http.Error(w, "ssotest: unavailable (Misbehavior.Unavailable)", http.StatusServiceUnavailable)
		return
	}
	switch {
	case r.Method == "GET" && r.URL.Path == "/.well-known/openid-configuration":
		p.discovery(w)
	case r.Method == "GET" && r.URL.Path == "/jwks":
		p.jwks(w)
	case r.Method == "GET" && r.URL.Path == "/authorize":
		p.authorize(w, r)
	case r.Method == "POST" && r.URL.Path == "/token":
		p.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (p *Provider) discovery(w http.ResponseWriter) {
	p.mu.Lock()
	methods := p.authMethods
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         p.URL,
		"authorization_endpoint":                         p.URL + "/authorize",
		"token_endpoint":                                 p.URL + "/token",
		"jwks_uri":                                       p.URL + "/jwks",
		"response_types_supported":                       []string{"code"},
		"subject_types_supported":                        []string{"public"},
		"id_token_signing_alg_values_supported":          []string{"RS256"},
		"scopes_supported":                               []string{"openid", "email", "profile"},
		"token_endpoint_auth_methods_supported":          methods,
		"code_challenge_methods_supported":               []string{"S256"},
		"authorization_response_iss_parameter_supported": true,
	})
}

func (p *Provider) jwks(w http.ResponseWriter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &p.key.PublicKey, KeyID: p.kid, Algorithm: "RS256", Use: "sig"},
	}})
}

// authorize signs the user in at once. An unknown client or redirect_uri is
// answered here (400), never by a redirect to an unregistered address; every
// other error is sent back to the client's redirect_uri, as OAuth 2.0 says.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.clients[q.Get("client_id")]
	if !ok {
		http.Error(w, "ssotest: unknown client_id", http.StatusBadRequest)
		return
	}
	if !slices.Contains(c.RedirectURIs, q.Get("redirect_uri")) {
		http.Error(w, "ssotest: redirect_uri is not registered for this client", http.StatusBadRequest)
		return
	}
	back := func(params map[string]string) {
		u, _ := url.Parse(q.Get("redirect_uri"))
		v := u.Query()
		for k, val := range params {
			v.Set(k, val)
		}
		if s := q.Get("state"); s != "" {
			v.Set("state", s)
		}
		v.Set("iss", p.URL)
		if p.bad.AuthorizeIssuer != "" {
			v.Set("iss", p.bad.AuthorizeIssuer)
		}
		u.RawQuery = v.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	}
	switch {
	case q.Get("response_type") != "code":
		back(map[string]string{"error": "unsupported_response_type"})
	case !slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		back(map[string]string{"error": "invalid_scope", "error_description": "ssotest: scope must include openid"})
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		back(map[string]string{"error": "invalid_request", "error_description": "ssotest: PKCE with S256 is required"})
	case p.bad.AuthorizeError != "":
		back(map[string]string{"error": p.bad.AuthorizeError, "error_description": "ssotest: <b>detail</b> for the client's log only"})
	default:
		code := rand.Text()
		p.codes[code] = &grant{
			client:      c.ID,
			redirectURI: q.Get("redirect_uri"),
			challenge:   q.Get("code_challenge"),
			nonce:       q.Get("nonce"),
			user:        p.user,
			expires:     time.Now().Add(10 * time.Minute),
		}
		back(map[string]string{"code": code})
	}
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokenRequests++
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "ssotest: bad form")
		return
	}
	c, ok := p.authenticate(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="ssotest"`)
		oauthError(w, http.StatusUnauthorized, "invalid_client", "ssotest: client authentication failed")
		return
	}
	if p.bad.TokenError != "" {
		oauthError(w, http.StatusBadRequest, p.bad.TokenError, "ssotest: Misbehavior.TokenError")
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "ssotest: only authorization_code")
		return
	}
	g, ok := p.codes[r.PostForm.Get("code")]
	switch {
	case !ok:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "ssotest: unknown code")
		return
	case g.used:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "ssotest: code already used")
		return
	}
	g.used = true // whatever follows: a code is presented once
	switch {
	case g.client != c.ID:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "ssotest: code was issued to another client")
	case r.PostForm.Get("redirect_uri") != g.redirectURI:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "ssotest: redirect_uri differs from the authorization request's")
	case s256(r.PostForm.Get("code_verifier")) != g.challenge:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "ssotest: PKCE code_verifier does not match the code_challenge")
	case time.Now().After(g.expires):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "ssotest: code expired")
	default:
		resp := map[string]any{"access_token": rand.Text(), "token_type": "Bearer", "expires_in": 3600}
		if !p.bad.NoIDToken {
			resp["id_token"] = p.idToken(c.ID, g)
		}
		writeJSON(w, http.StatusOK, resp)
	}
}

// authenticate checks the client's credentials, sent as the announced
// methods allow: HTTP Basic with form-encoded ID and secret (RFC 6749
// 2.3.1), or client_id and client_secret in the form.
func (p *Provider) authenticate(r *http.Request) (Client, bool) {
	id, secret, basic := r.BasicAuth()
	method := "client_secret_basic"
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret, method = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret"), "client_secret_post"
	}
	c, ok := p.clients[id]
	if !ok || !slices.Contains(p.authMethods, method) || subtle.ConstantTimeCompare([]byte(secret), []byte(c.Secret)) != 1 {
		return Client{}, false
	}
	return c, true
}

func (p *Provider) idToken(clientID string, g *grant) string {
	now := time.Now()
	u := g.user
	claims := map[string]any{
		"iss":       p.URL,
		"sub":       u.Subject,
		"aud":       clientID,
		"iat":       now.Unix(),
		"auth_time": now.Unix(),
		"exp":       now.Add(time.Hour).Unix(),
	}
	set := func(k string, v string) {
		if v != "" {
			claims[k] = v
		}
	}
	set("nonce", g.nonce)
	set("email", u.Email)
	if u.Email != "" {
		claims["email_verified"] = u.EmailVerified
	}
	set("name", u.Name)
	set("preferred_username", u.PreferredUsername)
	if u.Groups != nil {
		claims["groups"] = u.Groups
	}
	for k, v := range u.Claims {
		if v == nil {
			delete(claims, k)
		} else {
			claims[k] = v
		}
	}
	b := p.bad
	if b.Issuer != "" {
		claims["iss"] = b.Issuer
	}
	if b.Audience != nil {
		claims["aud"] = b.Audience
	}
	if b.AZP != "" {
		claims["azp"] = b.AZP
	}
	if b.Nonce != "" {
		claims["nonce"] = b.Nonce
	}
	if b.Expired {
		claims["iat"], claims["exp"] = now.Add(-time.Hour).Unix(), now.Add(-time.Minute).Unix()
	}
	payload, _ := json.Marshal(claims)

	switch {
	case b.Unsigned:
		enc := base64.RawURLEncoding.EncodeToString
		return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(payload) + "."
	case b.HMAC:
		der, _ := x509.MarshalPKIXPublicKey(&p.key.PublicKey)
		return sign(jose.HS256, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), p.kid, payload)
	case b.UnknownKey:
		return sign(jose.RS256, foreignKey(), p.kid, payload)
	}
	return sign(jose.RS256, p.key, p.kid, payload)
}

func sign(alg jose.SignatureAlgorithm, key any, kid string, payload []byte) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		panic(fmt.Sprintf("ssotest: signer: %v", err))
	}
	jws, err := s.Sign(payload)
	if err != nil {
		panic(fmt.Sprintf("ssotest: sign: %v", err))
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		panic(fmt.Sprintf("ssotest: serialize: %v", err))
	}
	return out
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
