package config

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// parser reads typed values, collecting one error per bad variable.
type parser struct {
	get   Lookup
	asked map[string]bool // every variable read: the configuration's keys
	errs  []error
}

func (p *parser) fail(key, val, accepts string) {
	p.errs = append(p.errs, fmt.Errorf("%s=%q is not valid: accepts %s", key, val, accepts))
}

func (p *parser) raw(key string) (string, bool) {
	p.asked[key] = true
	v, ok := p.get(key)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

func (p *parser) str(key, def string) string {
	if v, ok := p.raw(key); ok {
		return v
	}
	return def
}

func (p *parser) oneOf(key, def string, accepted ...string) string {
	v, ok := p.raw(key)
	if !ok {
		return def
	}
	v = strings.ToLower(v)
	for _, a := range accepted {
		if v == a && a != "" {
			return v
		}
	}
	var names []string
	for _, a := range accepted {
		if a != "" {
			names = append(names, a)
		}
	}
	p.fail(key, v, "one of "+strings.Join(names, ", "))
	return def
}

func (p *parser) addr(key, def string) string {
	v, ok := p.raw(key)
	if !ok {
		return def
	}
	host, port, err := net.SplitHostPort(v)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n < 0 || n > 65535 || strings.ContainsAny(host, "/ ") {
		p.fail(key, v, "host:port, such as 127.0.0.1:8080 or :8080")
		return def
	}
	return v
}

func (p *parser) url(key, def string) string {
	v, ok := p.raw(key)
	if !ok {
		return def
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.fail(key, v, "an http:// or https:// URL")
		return def
	}
	return strings.TrimRight(v, "/")
}

func (p *parser) databaseURL(key string) string {
	v, ok := p.raw(key)
	if !ok {
		return ""
	}
	if IsPostgres(v) {
		if _, err := url.Parse(v); err == nil {
			return v
		}
	}
	p.fail(key, v, "postgres://user:password@host:port/dbname, or empty for SQLite in DATACHAT_DATA_DIR")
	return ""
}

func (p *parser) integer(key string, def, min int) int {
	v, ok := p.raw(key)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
	if err != nil || n < min {
		p.fail(key, v, fmt.Sprintf("a whole number of at least %d", min))
		return def
	}
	return n
}

// integerIn reads a whole number from min to max; zero is what min means,
// said in the error.
func (p *parser) integerIn(key string, def, min, max int, zero string) int {
	v, ok := p.raw(key)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
	if err != nil || n < min || n > max {
		p.fail(key, v, fmt.Sprintf("a whole number from %s to %d", zero, max))
		return def
	}
	return n
}

func (p *parser) float(key string, def, min, max float64) float64 {
	v, ok := p.raw(key)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < min || f > max {
		p.fail(key, v, fmt.Sprintf("a number from %g to %g", min, max))
		return def
	}
	return f
}

func (p *parser) boolean(key string, def bool) bool {
	v, ok := p.raw(key)
	if !ok {
		return def
	}
	switch strings.ToLower(v) {
	case "true", "1":
		return true
	case "false", "0":
		return false
	}
	p.fail(key, v, "true, false, 1 or 0")
	return def
}

func (p *parser) duration(key string, def time.Duration) time.Duration {
	return p.durationMin(key, def, time.Millisecond)
}

func (p *parser) durationMin(key string, def, min time.Duration) time.Duration {
	v, ok := p.raw(key)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < min {
		p.fail(key, v, fmt.Sprintf("a Go duration of at least %s, such as 30s or 2m", min))
		return def
	}
	return d
}

func (p *parser) size(key string, def, min int64) int64 {
	v, ok := p.raw(key)
	if !ok {
		return def
	}
	n, err := ParseSize(v)
	if err != nil || n < min {
		p.fail(key, v, fmt.Sprintf("a size of at least %d bytes, in bytes or with a unit such as 512MiB or 1GB", min))
		return def
	}
	return n
}

func (p *parser) list(key string) []string {
	v, ok := p.raw(key)
	if !ok {
		return nil
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (p *parser) logLevel(key string) slog.Level {
	v, ok := p.raw(key)
	if !ok {
		return slog.LevelInfo
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(v)); err != nil {
		p.fail(key, v, "debug, info, warn or error")
		return slog.LevelInfo
	}
	return l
}

func (p *parser) allowPrivate(key string) (bool, []netip.Prefix) {
	v, ok := p.raw(key)
	if !ok {
		return false, nil
	}
	all, nets, err := ParseAllowPrivate(v)
	if err != nil {
		p.fail(key, v, "true, false, or a comma-separated list of CIDRs such as 127.0.0.1/32,10.0.0.0/8")
		return false, nil
	}
	return all, nets
}

// ParseAllowPrivate parses DATACHAT_ALLOW_PRIVATE_URLS: "true"/"1" allows every
// address, "false"/"0"/"" none, anything else is a comma-separated list of CIDRs
// (a bare IP counts as a /32 or /128).
func ParseAllowPrivate(s string) (all bool, nets []netip.Prefix, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1":
		return true, nil, nil
	case "false", "0", "":
		return false, nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return false, nil, fmt.Errorf("%q is neither true, false nor a CIDR like 127.0.0.1/32", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		nets = append(nets, p.Masked())
	}
	return false, nets, nil
}

// ParseSize parses a byte size: a plain number of bytes, or a number with a unit
// (B, KB, MB, GB, TB in powers of 1000; KiB, MiB, GiB, TiB in powers of 1024).
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: no number", s)
	}
	mult, ok := map[string]float64{
		"": 1, "b": 1,
		"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	}[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q", s, unit)
	}
	n := f * mult
	if n > 1<<62 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return int64(n), nil
}
