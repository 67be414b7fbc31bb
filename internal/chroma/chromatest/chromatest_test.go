package chromatest

import (
	"net/http"
	"testing"
	"time"
)

func TestStart(t *testing.T) {
	s := Start(t)
	resp, err := http.Get(s.URL + "/api/v2/heartbeat")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("heartbeat: %s", resp.Status)
	}
	s.Close()
	s.Close() // idempotent; Cleanup calls it again
	c := &http.Client{Timeout: 2 * time.Second}
	if resp, err := c.Get(s.URL + "/api/v2/heartbeat"); err == nil {
		resp.Body.Close()
		t.Errorf("the server still answers after Close")
	}
}
