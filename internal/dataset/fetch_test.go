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
		{other.URL + "/tips.csv", "refused to connect to 127.0.0.2: a loopback address"},
		{srv.URL + "/to-other", "refused to connect to 127.0.0.2"},
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
		{"/slow-headers.csv", "timeout awaiting response headers"},
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
