package dataset

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"datachat"
	"datachat/internal/duckdb"
)

// blockedNets are refused besides what netip's predicates catch (loopback,
// private, link-local, multicast, unspecified).
var blockedNets = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",          // "this network"
		"100.64.0.0/10",      // carrier-grade NAT (and Alibaba's metadata 100.100.100.200)
		"192.0.0.0/24",       // IETF protocol assignments (Oracle's metadata 192.0.0.192)
		"198.18.0.0/15",      // benchmarking
		"240.0.0.0/4",        // reserved, broadcast
		"168.63.129.16/32",   // Azure's wire server
		"fec0::/10",          // site-local (deprecated)
		"2001::/32",          // Teredo tunnels
		"100::/64",           // discard
		"fd00:ec2::254/128",  // AWS metadata over IPv6 (also in fc00::/7)
		"64:ff9b:1::/48",     // local-use NAT64
		"::ffff:0:0:0/96",    // SIIT
		"2001:db8::/32",      // documentation
		"ff00::/8",           // multicast
		"169.254.169.254/32", // cloud metadata (also link-local)
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// internalAddr says why an address is refused, or "" if it is public.
func internalAddr(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsPrivate():
		return "a private address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "a link-local address"
	case ip.IsUnspecified():
		return "an unspecified address"
	case ip.IsMulticast():
		return "a multicast address"
	}
	for _, p := range blockedNets {
		if p.Contains(ip) {
			return "an internal or reserved address"
		}
	}
	if ip.Is6() {
		// IPv4 addresses inside IPv6 ones: NAT64, 6to4, IPv4-compatible.
		b := ip.As16()
		var v4 netip.Addr
		switch {
		case netip.MustParsePrefix("64:ff9b::/96").Contains(ip):
			v4 = netip.AddrFrom4([4]byte(b[12:16]))
		case netip.MustParsePrefix("2002::/16").Contains(ip):
			v4 = netip.AddrFrom4([4]byte(b[2:6]))
		case netip.MustParsePrefix("::/96").Contains(ip):
			v4 = netip.AddrFrom4([4]byte(b[12:16]))
		}
		if v4.IsValid() {
			if why := internalAddr(v4); why != "" {
				return why + " (embedded in IPv6)"
			}
		}
	}
	return ""
}

// addrError is a connection the dialer refused.
type addrError struct {
	addr netip.Addr
	why  string
}

func (e *addrError) Error() string {
	return fmt.Sprintf("refused to connect to %s: %s", e.addr, e.why)
}

// allowed checks an address about to be dialled.
func (l *Loader) allowed(ip netip.Addr) error {
	ip = ip.Unmap()
	if l.opts.AllowPrivate {
		return nil
	}
	for _, p := range l.opts.AllowNets {
		if p.Contains(ip) {
			return nil
		}
	}
	if why := internalAddr(ip); why != "" {
		return &addrError{addr: ip, why: why}
	}
	return nil
}

// newClient returns the HTTP client for Fetch: every connection, redirects
// included, is checked at dial time against the address actually dialled (so
// DNS rebinding cannot slip past a check made earlier), no proxy is used, and
// at most 5 redirects are followed.
func (l *Loader) newClient() *http.Client {
	dialer := &net.Dialer{
		Timeout:   l.opts.ConnectTimeout,
		KeepAlive: 30 * time.Second,
		Resolver:  l.opts.Resolver,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("dial %s: %w", address, err)
			}
			return l.allowed(ap.Addr())
		},
	}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would dial on our behalf, past the check
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   l.opts.ConnectTimeout,
		ResponseHeaderTimeout: l.opts.HeaderTimeout,
		IdleConnTimeout:       30 * time.Second,
		MaxIdleConns:          8,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return datachat.Errorf(datachat.EINVALID, "too many redirects (more than %d)", maxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return datachat.Errorf(datachat.EINVALID, "redirect to a %s URL refused: only http and https are allowed", req.URL.Scheme)
			}
			return nil
		},
	}
}

const maxRedirects = 5

// Fetch downloads a dataset from an http(s) URL and stores it as [Loader.Ingest]
// does. Internal addresses are refused unless allowed by Options; the size is
// capped at MaxBytes.
//
// Errors: EINVALID for a bad URL, a refused address, an HTTP error status, a
// file too large or unreadable; ctx's error when it ends first.
func (l *Loader) Fetch(ctx context.Context, rawURL string) ([]*Stored, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	switch {
	case err != nil || u.Scheme == "":
		return nil, datachat.Errorf(datachat.EINVALID, "%q is not a valid URL", rawURL)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, datachat.Errorf(datachat.EINVALID, "only http and https URLs can be loaded, not %s", u.Scheme)
	case u.Host == "":
		return nil, datachat.Errorf(datachat.EINVALID, "%q is not a valid URL: it has no host", rawURL)
	}
	parent := ctx
	ctx, cancelTimeout := context.WithTimeout(ctx, l.opts.FetchTimeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, datachat.Errorf(datachat.EINVALID, "%q is not a valid URL", rawURL)
	}
	req.Header.Set("User-Agent", "datachat/1 (dataset loader)")
	req.Header.Set("Accept", "text/csv, application/vnd.apache.parquet, application/octet-stream;q=0.9, */*;q=0.5")
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, l.fetchError(ctx, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, datachat.Errorf(datachat.EINVALID, "could not load %s: the server answered %s", redact(u), resp.Status)
	}
	if resp.ContentLength > l.opts.MaxBytes {
		return nil, datachat.Errorf(datachat.EINVALID, "could not load %s: it is %s, over the %s limit", redact(u), duckdb.SizeText(resp.ContentLength), duckdb.SizeText(l.opts.MaxBytes))
	}
	name := fileNameOf(resp, u)
	// A server that stops sending is given up on after HeaderTimeout of silence.
	idle := time.AfterFunc(l.opts.HeaderTimeout, func() { cancel(errIdle) })
	tmp, err := l.spool(idleReader{resp.Body, idle, l.opts.HeaderTimeout}, name)
	idle.Stop()
	if err != nil {
		switch {
		case parent.Err() != nil:
			return nil, parent.Err()
		case context.Cause(ctx) == errIdle:
			return nil, datachat.Errorf(datachat.EINVALID, "could not load %s: the server sent nothing for %s", redact(u), l.opts.HeaderTimeout)
		case ctx.Err() != nil:
			return nil, l.fetchError(ctx, u, ctx.Err())
		}
		var de *datachat.Error
		if errors.As(err, &de) {
			return nil, err
		}
		return nil, datachat.WrapError(datachat.EINVALID, fmt.Sprintf("could not load %s: the download failed", redact(u)), err)
	}
	defer os.Remove(tmp)
	st, err := l.store(ctx, tmp, name, redact(u))
	if err != nil {
		return nil, err
	}
	return st, nil
}

var errIdle = errors.New("download idle")

// idleReader pushes back a timer at every read that returns data.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	after time.Duration
}

func (ir idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.timer.Reset(ir.after)
	}
	return n, err
}

// fetchError says why a download failed, and what to do, in the user's
// terms: not a resolver's address or Go's dialer wording.
func (l *Loader) fetchError(ctx context.Context, u *url.URL, err error) error {
	var (
		ae  *addrError
		de  *datachat.Error
		dns *net.DNSError
		cv  *tls.CertificateVerificationError
		ne  net.Error
		op  *net.OpError
	)
	fail := func(format string, args ...any) error {
		return datachat.Errorf(datachat.EINVALID, "could not load %s: "+format, append([]any{redact(u)}, args...)...)
	}
	switch {
	case errors.As(err, &ae):
		return fail("%s is %s, and private and internal addresses are not loaded unless DATACHAT_ALLOW_PRIVATE_URLS allows them (true, or CIDRs such as %s, where datachat runs)",
			ae.addr, ae.why, netip.PrefixFrom(ae.addr, ae.addr.BitLen()))
	case errors.As(err, &de):
		return de
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return datachat.WrapError(datachat.EINVALID, fmt.Sprintf("could not load %s: no complete answer within %s", redact(u), l.opts.FetchTimeout), err)
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &dns):
		host := u.Hostname()
		switch {
		case dns.IsNotFound:
			return fail("there is no host named %s; check the address", host)
		case dns.IsTimeout:
			return fail("looking up the address of %s took too long; try again later", host)
		}
		return fail("the address of %s could not be looked up; try again later", host)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fail("nothing answers at %s (the connection was refused); check the address and port", hostPort(u))
	case errors.Is(err, syscall.ECONNRESET):
		return fail("the server at %s closed the connection; try again later", hostPort(u))
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return fail("%s cannot be reached from the server; check the address", hostPort(u))
	case errors.As(err, &cv):
		return fail("the server's TLS certificate is not valid (%v); check the address, or load the file from a server with a valid certificate", cv.Err)
	case errors.As(err, &op) && op.Op == "dial" && op.Timeout():
		return fail("no connection to %s within %s; check the address, or try again later", hostPort(u), l.opts.ConnectTimeout)
	case errors.As(err, &ne) && ne.Timeout():
		return fail("the server sent no answer within %s; try again later", l.opts.HeaderTimeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fail("%v", err)
}

// hostPort is a URL's host and port, the port its scheme's when it has none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// redact drops a URL's password.
func redact(u *url.URL) string {
	return u.Redacted()
}

// fileNameOf picks the dataset's file name: Content-Disposition's filename,
// else the last element of the URL's path, else of the final URL's.
func fileNameOf(resp *http.Response, u *url.URL) string {
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil && params["filename"] != "" {
		return path.Base(params["filename"])
	}
	for _, c := range []*url.URL{u, resp.Request.URL} {
		if c == nil {
			continue
		}
		if b := path.Base(c.Path); b != "." && b != "/" && b != "" {
			return b
		}
	}
	return "dataset"
}

// spool streams r into a temp file in the dataset directory: the one place
// an upload's (or a download's) bytes enter, where what the loader refuses
// of their size is decided — nothing at all, more than MaxBytes, a line
// longer than the engine takes (Engine.LimitLines).
func (l *Loader) spool(r io.Reader, name string) (string, error) {
	f, err := os.CreateTemp(l.tmpDir, "upload-*")
	if err != nil {
		return "", datachat.ClassifyNoSpace(fmt.Errorf("create temp file: %w", err))
	}
	n, err := io.Copy(l.opts.Engine.LimitLines(f, name), io.LimitReader(r, l.opts.MaxBytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
	case n == 0:
		err = datachat.Errorf(datachat.EINVALID, "%s is empty", name)
	case n > l.opts.MaxBytes:
		err = datachat.Errorf(datachat.EINVALID, "%s is larger than the %s limit", name, duckdb.SizeText(l.opts.MaxBytes))
	}
	if err != nil {
		os.Remove(f.Name())
		// A full disk is the server's condition, not the file's fault, and
		// its message names no server path.
		return "", datachat.ClassifyNoSpace(err)
	}
	return f.Name(), nil
}
