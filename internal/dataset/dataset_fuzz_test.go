package dataset

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"datachat"
	"datachat/internal/config"
	"datachat/internal/sharedtest"
)

// Fuzz targets for what datasets take from outside: uploaded and downloaded
// bytes (CSV in any encoding, compressed, or Parquet), the URL and the
// download's headers, the file name that becomes a table name, Parquet
// footers read for page checksums, and the private-address policy. Run one
// with, e.g.: go test -run '^$' -fuzz '^FuzzIngest$' -fuzztime 30s ./internal/dataset

var tableNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// checkStored checks what a stored dataset promises.
func checkStored(t *testing.T, l *Loader, st *Stored) {
	t.Helper()
	if len(st.Columns) == 0 || st.RowCount < 0 || st.Bytes <= 0 {
		t.Fatalf("stored dataset without columns, rows or bytes: %+v", st)
	}
	if !tableNameRE.MatchString(st.Name) {
		t.Fatalf("table name %q is not a plain identifier", st.Name)
	}
	for _, c := range st.Columns {
		if !utf8.ValidString(c.Name) || c.Type == "" {
			t.Fatalf("column %+v: want a valid UTF-8 name and a type", c)
		}
	}
	if _, err := os.Stat(filepath.Join(l.Dir(), st.Path)); err != nil {
		t.Fatalf("stored file: %v", err)
	}
}

// ingestError checks a refused intake: EINVALID with a message, never a
// hang or an internal error, and nothing left behind.
func ingestError(t *testing.T, ctx context.Context, l *Loader, err error) {
	t.Helper()
	if ctx.Err() != nil {
		t.Fatalf("intake did not end within its deadline: %v", err)
	}
	if code := datachat.ErrorCode(err); code != datachat.EINVALID || datachat.ErrorMessage(err) == "" {
		t.Fatalf("got error %v (code %q), want EINVALID with a message", err, code)
	}
	mustBeClean(t, l)
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// addFile returns a file of ../shared/data for a seed corpus, or nil when
// ../shared is absent.
func addFile(f *testing.F, rel string) []byte {
	return sharedtest.Seed(f, "data/"+rel)
}

func fuzzLoader(f *testing.F) *Loader {
	return mustLoader(f, Options{MaxBytes: 1 << 20})
}

func FuzzIngest(f *testing.F) {
	if b := addFile(f, "csv/tips.csv"); b != nil {
		f.Add(b[:2000], "tips.csv")
		f.Add(addFile(f, "csv/test_mskanji.csv"), "test_mskanji.csv")
		f.Add(addFile(f, "parquet/alltypes_plain.parquet"), "alltypes_plain.parquet")
	}
	f.Add([]byte("a,b\n1,2\n3,\n"), "x.csv")
	f.Add(gzipped([]byte("a;b\n1;2\n")), "x.csv.gz")
	f.Add([]byte("\xff\xfea\x00,\x00b\x00\n\x001\x00,\x002\x00\n\x00"), "u16.csv")
	f.Add([]byte("name\tcity\n\"Zoë\"\tK\xf6ln\n"), "latin.tsv")
	f.Add([]byte("col\n\"unterminated\n"), "q.csv")
	f.Add([]byte("PAR1\x00\x00PAR1"), "bad.parquet")
	l := fuzzLoader(f)
	f.Fuzz(func(t *testing.T, data []byte, filename string) {
		checkLoad(t, l, func(ctx context.Context) ([]*Stored, error) {
			return l.Ingest(ctx, bytes.NewReader(data), filename)
		}, nil)
	})
}

// checkLoad runs load with a 30-second deadline. A failure must be a clean
// refusal (ingestError); each table it stores passes checkStored and then
// check (if not nil), and the loader is left clean; the tables are removed
// at the end.
func checkLoad(t *testing.T, l *Loader, load func(ctx context.Context) ([]*Stored, error), check func(st *Stored)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sts, err := load(ctx)
	if err != nil {
		ingestError(t, ctx, l, err)
		return
	}
	defer l.RemoveAll(sts)
	for _, st := range sts {
		checkStored(t, l, st)
		if check != nil {
			check(st)
		}
	}
	mustBeClean(t, l)
}

// fakeTransport answers every request with one canned response, so Fetch's
// URL and header handling can be fuzzed without any network.
type fakeTransport struct {
	header http.Header
	body   []byte
}

func (ft fakeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: ft.header, Body: io.NopCloser(bytes.NewReader(ft.body)), ContentLength: -1, Request: r,
	}, nil
}

func FuzzFetch(f *testing.F) {
	f.Add("https://example.com/data/sales.csv?x=1#frag", "", []byte("a,b\n1,2\n"))
	f.Add("http://user:secret@example.com/", `attachment; filename="../../etc/passwd.csv"`, []byte("x\n1\n"))
	if b := addFile(f, "parquet/alltypes_plain.parquet"); b != nil {
		f.Add("https://example.com/download", `attachment; filename*=UTF-8''Ma%C3%B1ana.parquet`, b)
	}
	f.Add("ftp://example.com/a.csv", "", []byte("a\n"))
	f.Add(" HTTPS://[::1]:8080/%zz ", "inline", []byte(""))
	l := fuzzLoader(f)
	f.Fuzz(func(t *testing.T, rawURL, disposition string, body []byte) {
		h := http.Header{}
		h.Set("Content-Disposition", disposition)
		l.client = &http.Client{Transport: fakeTransport{header: h, body: body}}
		checkLoad(t, l, func(ctx context.Context) ([]*Stored, error) {
			return l.Fetch(ctx, rawURL)
		}, func(st *Stored) {
			// The source shown to people and models never carries a password.
			if u, err := url.Parse(st.Source); err == nil && u.User != nil {
				if p, ok := u.User.Password(); ok && p != "xxxxx" {
					t.Fatalf("source %q shows the URL's password", st.Source)
				}
			}
		})
	})
}

func FuzzTableName(f *testing.F) {
	f.Add("alltypes_plain.snappy.parquet", "")
	f.Add("StarWars.csv", "starwars,starwars_2")
	f.Add("2024 sales (final).csv.gz", "")
	f.Add("https://x.test/a/select.parquet?download=1", "select_data")
	f.Add("", "dataset")
	f.Add(`C:\data\..\Ünïcode.tsv`, "")
	f.Fuzz(func(t *testing.T, filename, takenList string) {
		taken := strings.Split(takenList, ",")
		name := datachat.TableName(filename, taken)
		if !tableNameRE.MatchString(name) {
			t.Fatalf("datachat.TableName(%q) = %q: not a plain identifier", filename, name)
		}
		if datachat.IsReservedWord(name) {
			t.Fatalf("datachat.TableName(%q) = %q: a reserved word", filename, name)
		}
		for _, tk := range taken {
			if strings.EqualFold(tk, name) {
				t.Fatalf("datachat.TableName(%q, %q) = %q: already taken", filename, taken, name)
			}
		}
		if again := datachat.TableName(filename, taken); again != name {
			t.Fatalf("TableName is not deterministic: %q then %q", name, again)
		}
	})
}

// FuzzAddressPolicy checks the SSRF guard: whatever DATACHAT_ALLOW_PRIVATE_URLS
// says, an internal address outside what it allows is refused.
func FuzzAddressPolicy(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1}, "")
	f.Add([]byte{10, 1, 2, 3}, "127.0.0.1/32")
	f.Add([]byte{169, 254, 169, 254}, "false")
	f.Add(netip.MustParseAddr("::ffff:192.168.0.1").AsSlice(), "10.0.0.0/8, ::1")
	f.Add(netip.MustParseAddr("64:ff9b::a9fe:a9fe").AsSlice(), "")
	f.Add(netip.MustParseAddr("2002:7f00:1::").AsSlice(), "")
	f.Add([]byte{8, 8, 8, 8}, "true")
	f.Fuzz(func(t *testing.T, raw []byte, spec string) {
		ip, ok := netip.AddrFromSlice(raw)
		if !ok {
			return
		}
		all, nets, err := config.ParseAllowPrivate(spec)
		if err != nil {
			return
		}
		a := ip.Unmap()
		internal := a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
			a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified()
		if internal && internalAddr(ip) == "" {
			t.Fatalf("internalAddr(%v) = \"\": an internal address taken for public", ip)
		}
		l := &Loader{opts: Options{AllowPrivate: all, AllowNets: nets}}
		err = l.allowed(ip)
		covered := all
		for _, p := range nets {
			covered = covered || p.Contains(a)
		}
		if internalAddr(ip) != "" && !covered && err == nil {
			t.Fatalf("allowed(%v) with %q: nil, want it refused", ip, spec)
		}
		if internalAddr(ip) == "" && err != nil {
			t.Fatalf("allowed(%v): %v, want a public address allowed", ip, err)
		}
	})
}
