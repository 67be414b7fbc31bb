package dataset

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/testnet"
)

func TestInternalAddr(t *testing.T) {
	for addr, internal := range map[string]bool{
		"127.0.0.1": true, "127.0.0.2": true, "10.1.2.3": true, "172.16.0.1": true, "172.31.255.255": true,
		"192.168.1.1": true, "169.254.169.254": true, "169.254.1.1": true, "100.64.0.1": true,
		"100.100.100.200": true, "0.0.0.0": true, "0.1.2.3": true, "224.0.0.1": true, "255.255.255.255": true,
		"192.0.0.192": true, "198.18.0.1": true, "168.63.129.16": true,
		"::1": true, "::": true, "fe80::1": true, "fc00::1": true, "fd00:ec2::254": true, "ff02::1": true,
		"::ffff:127.0.0.1": true, "::ffff:10.0.0.1": true, "64:ff9b::a9fe:a9fe": true, "2002:7f00:1::": true,
		"::127.0.0.1": true, "2001::1": true,
		"8.8.8.8": false, "1.1.1.1": false, "93.184.216.34": false, "172.32.0.1": false, "100.128.0.1": false,
		"2606:4700:4700::1111": false, "64:ff9b::808:808": false, "2002:808:808::": false,
	} {
		got := internalAddr(netip.MustParseAddr(addr)) != ""
		if got != internal {
			t.Errorf("%s: internal %v, want %v", addr, got, internal)
		}
	}
}

func TestFetch(t *testing.T) {
	tips, err := readShared(t, "csv/tips.csv")
	if err != nil {
		t.Fatal(err)
	}
	// A second server on 127.0.0.2, outside the allowed 127.0.0.1/32.
	ln2, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(tips) }))
	other.Listener.Close()
	other.Listener = ln2
	other.Start()
	defer other.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/tips.csv", func(w http.ResponseWriter, r *http.Request) { w.Write(tips) })
	mux.HandleFunc("/download", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Disposition", `attachment; filename="Restaurant Tips.csv"`)
		w.Write(tips)
	})
	mux.HandleFunc("/to-other", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/tips.csv", http.StatusFound)
	})
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n == 0 {
			http.Redirect(w, r, "/tips.csv", http.StatusFound)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
	})
	mux.HandleFunc("/big.csv", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000000")
		w.Write([]byte("a,b\n"))
	})
	mux.HandleFunc("/endless.csv", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 100000 && r.Context().Err() == nil; i++ {
			fmt.Fprintf(w, "%d,%d\n", i, i)
		}
	})
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/csv") // lies: the content decides
		w.Write([]byte("<!doctype html><title>Sign in</title>"))
	})
	stall := make(chan struct{})
	mux.HandleFunc("/stall.csv", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("a,b\n1,2\n"))
		w.(http.Flusher).Flush()
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/slow-headers.csv", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(stall)

	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	l := mustLoader(t, Options{AllowNets: allow, MaxBytes: 200 << 10})
	ctx := context.Background()

	one := func(url string) (*Stored, error) {
		sts, err := l.Fetch(ctx, url)
		if err != nil {
			return nil, err
		}
		if len(sts) != 1 {
			t.Fatalf("%s gave %d tables", url, len(sts))
		}
		return sts[0], nil
	}
	st, err := one(srv.URL + "/tips.csv")
	if err != nil {
		t.Fatal(err)
	}
	if st.RowCount != 244 || st.Name != "tips" || st.Source != srv.URL+"/tips.csv" {
		t.Errorf("got %+v", st)
	}
	st, err = one(srv.URL + "/download")
	if err != nil || st.Name != "restaurant_tips" {
		t.Errorf("Content-Disposition name: %v %v", st, err)
	}
	if _, err = one(srv.URL + "/hop/4"); err != nil { // 5 redirects
		t.Errorf("5 redirects: %v", err)
	}

	for _, c := range []struct {
		url, want string
	}{
		{other.URL + "/tips.csv", "127.0.0.2 is a loopback address"},
		{srv.URL + "/to-other", "127.0.0.2 is a loopback address"},
		{srv.URL + "/hop/5", "too many redirects"},
		{srv.URL + "/nothing-here.csv", "404"},
		{srv.URL + "/big.csv", "over the 200 KiB limit"},
		{srv.URL + "/endless.csv", "larger than the 200 KiB limit"},
		{srv.URL + "/page", "HTML"},
		{"ftp://127.0.0.1/x.csv", "only http and https"},
		{"file:///etc/passwd", "only http and https"},
		{"not a url", "not a valid URL"},
	} {
		_, err := l.Fetch(ctx, c.url)
		if datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(datachat.ErrorMessage(err), c.want) {
			t.Errorf("%s: got %v, want EINVALID with %q", c.url, err, c.want)
		}
	}

	// A server that stalls, before or during the body, is given up on.
	impatient := mustLoader(t, Options{AllowNets: allow, HeaderTimeout: 300 * time.Millisecond})
	for _, c := range []struct{ path, want string }{
		{"/stall.csv", "sent nothing for 300ms"},
		{"/slow-headers.csv", "the server sent no answer within 300ms"},
	} {
		start := time.Now()
		_, err := impatient.Fetch(ctx, srv.URL+c.path)
		if datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(datachat.ErrorMessage(err), c.want) {
			t.Errorf("%s: got %v, want EINVALID with %q", c.path, err, c.want)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: took %v", c.path, d)
		}
	}

	// Without the allowance, loopback is refused; with AllowPrivate, anything goes.
	strict := mustLoader(t, Options{})
	if _, err := strict.Fetch(ctx, srv.URL+"/tips.csv"); !strings.Contains(datachat.ErrorMessage(err), "loopback") {
		t.Errorf("strict: got %v", err)
	}
	open := mustLoader(t, Options{AllowPrivate: true})
	if _, err := open.Fetch(ctx, srv.URL+"/to-other"); err != nil {
		t.Errorf("AllowPrivate: %v", err)
	}
	mustBeClean(t, l)
}

// fakeDNS answers every query on a loopback UDP port with rcode (3:
// NXDOMAIN, 2: SERVFAIL), and returns a resolver that asks it.
func fakeDNS(t *testing.T, rcode byte) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if n < 12 {
				continue
			}
			resp := append([]byte(nil), buf[:n]...)
			resp[2] = 0x80 | buf[2]&0x79 // a response; the query's opcode and RD
			resp[3] = 0x80 | rcode       // RA, and the answer's code
			pc.WriteTo(resp, from)
		}
	}()
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", addr)
	}}
}

// TestFetchErrorsSayWhatToDo: a refused address names the setting that
// allows it; a host that does not exist, a server that refuses the
// connection or has a certificate the loader does not trust are said so,
// without a resolver's address or Go's dialer jargon.
func TestFetchErrorsSayWhatToDo(t *testing.T) {
	ctx := context.Background()
	strict := mustLoader(t, Options{})
	_, err := strict.Fetch(ctx, "http://127.0.0.1:9/x.csv")
	if msg := datachat.ErrorMessage(err); !strings.Contains(msg, "127.0.0.1 is a loopback address") || !strings.Contains(msg, "DATACHAT_ALLOW_PRIVATE_URLS") {
		t.Errorf("loopback: %q does not name DATACHAT_ALLOW_PRIVATE_URLS", msg)
	}
	_, err = strict.Fetch(ctx, "http://10.1.2.3/x.csv")
	if msg := datachat.ErrorMessage(err); !strings.Contains(msg, "10.1.2.3 is a private address") || !strings.Contains(msg, "DATACHAT_ALLOW_PRIVATE_URLS") {
		t.Errorf("private: %q does not name DATACHAT_ALLOW_PRIVATE_URLS", msg)
	}

	for _, tc := range []struct {
		rcode byte
		want  string
	}{
		{3, "could not load http://nosuch.example/x.csv: there is no host named nosuch.example; check the address"},
		{2, "could not load http://nosuch.example/x.csv: the address of nosuch.example could not be looked up; try again later"},
	} {
		l := mustLoader(t, Options{Resolver: fakeDNS(t, tc.rcode)})
		_, err := l.Fetch(ctx, "http://nosuch.example/x.csv")
		msg := datachat.ErrorMessage(err)
		if datachat.ErrorCode(err) != datachat.EINVALID || msg != tc.want {
			t.Errorf("rcode %d: got %q, want %q", tc.rcode, msg, tc.want)
		}
		if strings.Contains(msg, ":53") || strings.Contains(msg, "lookup") || strings.Contains(msg, "dial") {
			t.Errorf("rcode %d: %q shows the resolver's jargon", tc.rcode, msg)
		}
	}

	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	l := mustLoader(t, Options{AllowNets: allow})
	closed := testnet.ClosedAddr(t)
	_, err = l.Fetch(ctx, "http://"+closed+"/x.csv")
	if msg := datachat.ErrorMessage(err); msg != "could not load http://"+closed+"/x.csv: nothing answers at "+closed+" (the connection was refused); check the address and port" {
		t.Errorf("refused: got %q", msg)
	}
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("a\n1\n")) }))
	defer tlsSrv.Close()
	_, err = l.Fetch(ctx, tlsSrv.URL+"/x.csv")
	if msg := datachat.ErrorMessage(err); !strings.HasPrefix(msg, "could not load "+tlsSrv.URL+"/x.csv: the server's TLS certificate is not valid (") || strings.Contains(msg, "Get \"") {
		t.Errorf("untrusted certificate: got %q", msg)
	}
}
