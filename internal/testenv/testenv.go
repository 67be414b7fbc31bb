// Package testenv decides, in one place, what a test does when something it
// needs is not on the machine (PostgreSQL, MariaDB, Chromium, npm packages,
// ../shared, root for a tmpfs): on a developer's machine it skips, saying
// what to install; under CI — CI=true (or 1), as .ci/run sets — it fails,
// because CI installs everything and a skipped test there would hide a gap.
package testenv

import (
	"os"
	"testing"
)

// CI reports whether the tests run in CI: CI is "true" or "1".
func CI() bool {
	ci := os.Getenv("CI")
	return ci == "true" || ci == "1"
}

// Missing skips tb with why, or fails it under CI.
func Missing(tb testing.TB, why string) {
	tb.Helper()
	if CI() {
		tb.Fatalf("%s (CI is set: CI installs what the tests need, so this test must run there)", why)
	}
	tb.Skip(why)
}
