package report

import (
	"os"
	"strings"
	"testing"
)

// On Linux the machine's line names what /proc says, and the load average
// is its three numbers.
func TestMachine(t *testing.T) {
	if _, err := os.Stat("/proc/loadavg"); err != nil {
		t.Skip("no /proc on this system")
	}
	if got := strings.Fields(LoadAvg()); len(got) != 3 {
		t.Errorf("LoadAvg: got %q, want three numbers", got)
	}
	if got := Memory(); !strings.HasSuffix(got, " GiB") {
		t.Errorf("Memory: got %q, want GiB", got)
	}
	line := Machine()
	for _, want := range []string{CPUModel(), Memory(), "load average "} {
		if !strings.Contains(line, want) {
			t.Errorf("Machine: %q does not say %q", line, want)
		}
	}
	if !strings.HasSuffix(line, "\n") {
		t.Errorf("Machine: %q does not end with a newline", line)
	}
}
