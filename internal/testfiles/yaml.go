package testfiles

import (
	"fmt"
	"strings"
)

// Hostile YAML documents, each small (the red team's were 583 bytes to
// 1 MiB), for internal/yamlsafe's tests, the dictionary and eval tests, and
// bench/yamlbomb.

// YAMLLaughs is a billion laughs: levels anchors, each a sequence of fan
// aliases to the one before (fan^levels strings once expanded).
func YAMLLaughs(levels, fan int) string {
	var b strings.Builder
	b.WriteString("a0: &a0 [lol")
	for range fan - 1 {
		b.WriteString(",lol")
	}
	b.WriteString("]\n")
	for l := 1; l < levels; l++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d", l, l, l-1)
		for range fan - 1 {
			fmt.Fprintf(&b, ",*a%d", l-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// YAMLMerges is a merge-key fan-out in the shape of a data dictionary: each
// table's entry merges the one before fan times.
func YAMLMerges(levels, fan int) string {
	var b strings.Builder
	b.WriteString("datasets:\n  t0: &m0 {description: d, columns: {a: b}}\n")
	for l := 1; l < levels; l++ {
		fmt.Fprintf(&b, "  t%d: &m%d {<<: [*m%d", l, l, l-1)
		for range fan - 1 {
			fmt.Fprintf(&b, ",*m%d", l-1)
		}
		b.WriteString("]}\n")
	}
	return b.String()
}

// YAMLDeepFlow nests n flow sequences ([[[…]]]).
func YAMLDeepFlow(n int) string {
	return "notes: " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n"
}

// YAMLDeepBlock nests n block sequences on one line (- - - … x).
func YAMLDeepBlock(n int) string { return "notes:\n  " + strings.Repeat("- ", n) + "x\n" }

// YAMLManyKeys is one block mapping of n keys.
func YAMLManyKeys(n int) string {
	var b strings.Builder
	b.WriteString("datasets:\n  t:\n    columns:\n")
	for i := range n {
		fmt.Fprintf(&b, "      c%d: v\n", i)
	}
	return b.String()
}

// YAMLDenseList is a flow sequence of n one-digit numbers: the most values a
// byte can hold.
func YAMLDenseList(n int) string { return "notes: [" + strings.Repeat("1,", n) + "]\n" }
