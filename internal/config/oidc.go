package config

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// OIDC is single sign-on through an OpenID Connect provider (internal/sso),
// on when Issuer is set.
type OIDC struct {
	// Issuer is DATACHAT_OIDC_ISSUER, kept exactly as given: it must equal
	// the issuer of the provider's discovery document, trailing slash and
	// all.
	Issuer       string
	ClientID     string // DATACHAT_OIDC_CLIENT_ID
	ClientSecret string // DATACHAT_OIDC_CLIENT_SECRET
	// AllowedDomains is DATACHAT_OIDC_ALLOWED_DOMAINS in lower case: the
	// email domains that may sign in (none: any).
	AllowedDomains []string
	AdminGroup     string // DATACHAT_OIDC_ADMIN_GROUP: the group value that makes an admin
	GroupsClaim    string // DATACHAT_OIDC_GROUPS_CLAIM; "" means "groups"
}

func (p *parser) oidc() OIDC {
	return OIDC{
		Issuer:         p.issuer("DATACHAT_OIDC_ISSUER"),
		ClientID:       p.str("DATACHAT_OIDC_CLIENT_ID", ""),
		ClientSecret:   p.str("DATACHAT_OIDC_CLIENT_SECRET", ""),
		AllowedDomains: p.domains("DATACHAT_OIDC_ALLOWED_DOMAINS"),
		AdminGroup:     p.str("DATACHAT_OIDC_ADMIN_GROUP", ""),
		GroupsClaim:    p.str("DATACHAT_OIDC_GROUPS_CLAIM", ""),
	}
}

// publicURL parses DATACHAT_PUBLIC_URL: an origin, since the page and the
// API are served at the root.
func (p *parser) publicURL(key string) string {
	v, ok := p.raw(key)
	if !ok {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(v, "?") || strings.HasSuffix(v, "#") {
		p.fail(key, v, "the http:// or https:// address people open datachat at, such as https://chat.example.com (no path: datachat is served at the root)")
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// issuer parses DATACHAT_OIDC_ISSUER: https, or http on a loopback address
// (a provider on the same machine); anything else over plain http would let
// the network swap the provider's keys.
func (p *parser) issuer(key string) string {
	v, ok := p.raw(key)
	if !ok {
		return ""
	}
	u, err := url.Parse(v)
	if err == nil && u.Host != "" && u.User == nil && u.RawQuery == "" && u.Fragment == "" &&
		(u.Scheme == "https" || u.Scheme == "http" && isLoopback(u.Hostname())) {
		return v
	}
	p.fail(key, v, "the provider's issuer URL, https://… (http only on 127.0.0.1 or localhost), exactly as its /.well-known/openid-configuration names it")
	return ""
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (p *parser) domains(key string) []string {
	list := p.list(key)
	for i, d := range list {
		d = strings.ToLower(d)
		if strings.ContainsAny(d, "@/:*? \t") || strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") {
			p.fail(key, strings.Join(list, ","), "a comma-separated list of email domains such as example.com,example.org (no @ and no wildcards: list each subdomain)")
			return nil
		}
		list[i] = d
	}
	return list
}

// validateOIDC checks that single sign-on has what it needs, or is off.
func (c *Config) validateOIDC() error {
	o := c.OIDC
	if o.Issuer == "" {
		for _, v := range []struct{ key, val string }{
			{"DATACHAT_OIDC_CLIENT_ID", o.ClientID},
			{"DATACHAT_OIDC_CLIENT_SECRET", o.ClientSecret},
			{"DATACHAT_OIDC_ALLOWED_DOMAINS", strings.Join(o.AllowedDomains, ",")},
			{"DATACHAT_OIDC_ADMIN_GROUP", o.AdminGroup},
			{"DATACHAT_OIDC_GROUPS_CLAIM", o.GroupsClaim},
		} {
			if v.val != "" {
				return errors.New(v.key + " is set but DATACHAT_OIDC_ISSUER is not: set the issuer to turn single sign-on on")
			}
		}
		return nil
	}
	var errs []error
	if o.ClientID == "" {
		errs = append(errs, errors.New("DATACHAT_OIDC_ISSUER needs DATACHAT_OIDC_CLIENT_ID, the client ID the provider gave datachat"))
	}
	if o.ClientSecret == "" {
		errs = append(errs, errors.New("DATACHAT_OIDC_ISSUER needs DATACHAT_OIDC_CLIENT_SECRET, the client secret the provider gave datachat"))
	}
	if c.PublicURL == "" {
		errs = append(errs, errors.New("DATACHAT_OIDC_ISSUER needs DATACHAT_PUBLIC_URL, the address people open datachat at (such as https://chat.example.com): "+
			"the provider sends them back to DATACHAT_PUBLIC_URL/api/auth/oidc/callback, which must be registered with it as a redirect URI"))
	}
	if o.GroupsClaim != "" && o.AdminGroup == "" {
		errs = append(errs, errors.New("DATACHAT_OIDC_GROUPS_CLAIM is set but DATACHAT_OIDC_ADMIN_GROUP is not: the claim is only read to find the admin group"))
	}
	return errors.Join(errs...)
}
