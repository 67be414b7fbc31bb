// Package yamlsafe decodes YAML — and JSON, which YAML reads — that someone
// else wrote (a data dictionary a user uploads, an eval suite, a --config
// file) under hard limits on its size, its values, its nesting, the
// expansion of its aliases and merge keys, and the time it takes, so that a
// small hostile file cannot take the memory or the CPU of the process.
//
// YAML is read by go.yaml.in/yaml/v3 (the YAML organisation's maintained
// yaml.v3), in three steps, each bounded before it starts:
//
//  1. The bytes: at most [Options.MaxBytes], valid UTF-8 (else an [Error]
//     naming the line and the value), and at most [Options.MaxValues] places
//     where a value can start, counted over the bytes without parsing
//     (countValues). That bounds the tree the parser builds.
//  2. The tree (yaml.Node), walked iteratively: nesting at most
//     [Options.MaxDepth] deep, aliases and merge keys expanded (memoised per
//     anchor) to at most [Options.MaxExpanded] nodes, an alias inside its
//     own anchor refused, and the key comparisons yaml.v3's decoder makes
//     (quadratic in a mapping's keys) bounded by [Options.MaxKeyPairs].
//  3. The decode from that tree, and with [Options.Strict] our own check that
//     every key names a field.
//
// A document that is JSON (it starts with { or [ and json.Valid accepts it)
// is decoded by encoding/json instead, after the same size, UTF-8, depth
// and value checks: yaml.v3 refuses JSON's escaped surrogate pairs
// ("\ud83d\ude00", which Python writes for an emoji), and JSON has no aliases.
//
// A panic in the decoder becomes an error. The parser and the decoder
// cannot be interrupted, but the limits bound their work before they run;
// the walk checks the context and [Options.Timeout].
package yamlsafe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Options names the input and sets its limits; a zero limit takes the
// default.
type Options struct {
	// What names the input in messages, as their subject: "the dictionary
	// file", "suite suite.yaml".
	What string
	// Strict refuses a mapping key that names no field of the struct it
	// decodes into.
	Strict bool

	MaxBytes    int // the document's size; default 1 MiB
	MaxValues   int // places a value can start, counted over the bytes; default 100,000
	MaxDepth    int // nesting of mappings and sequences, aliases expanded; default 64
	MaxExpanded int // nodes once aliases and merge keys are expanded; default 200,000
	MaxKeyPairs int // key comparisons of the decoder (E²/2 for a mapping of E keys); default 25,000,000
	Timeout     time.Duration
}

// Defaults of [Options].
const (
	DefaultMaxBytes    = 1 << 20
	DefaultMaxValues   = 100_000
	DefaultMaxDepth    = 64
	DefaultMaxExpanded = 200_000
	DefaultMaxKeyPairs = 25_000_000
	DefaultTimeout     = 5 * time.Second
)

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxBytes, DefaultMaxBytes)
	def(&o.MaxValues, DefaultMaxValues)
	def(&o.MaxDepth, DefaultMaxDepth)
	def(&o.MaxExpanded, DefaultMaxExpanded)
	def(&o.MaxKeyPairs, DefaultMaxKeyPairs)
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.What == "" {
		o.What = "the document"
	}
	return o
}

// Kinds of [Error].
const (
	TooLarge     = "size"      // more than MaxBytes
	TooMany      = "values"    // more than MaxValues
	TooDeep      = "depth"     // nested more than MaxDepth
	TooExpanded  = "aliases"   // aliases and merge keys expand past MaxExpanded, or an alias is inside its anchor
	TooManyKeys  = "keys"      // mappings too large to check (MaxKeyPairs)
	TooSlow      = "time"      // Timeout passed, or the context ended
	InvalidUTF8  = "utf8"      // not UTF-8 text
	Syntax       = "syntax"    // not YAML (or JSON)
	Shape        = "shape"     // YAML, but not the shape of the value decoded into
	UnknownField = "field"     // Strict: a key that names no field
	Documents    = "documents" // more than one YAML document
	Crash        = "crash"     // the decoder panicked
)

// Error is why a document was refused. Its message names the input, says
// what is wrong and what to do.
type Error struct {
	Kind string
	// Line is the line the problem is on, when known (1-based).
	Line int
	// Path locates the value, for InvalidUTF8 and UnknownField: the keys
	// and sequence indexes ("[2]") from the top.
	Path []string
	// Key is true when the invalid text is a mapping key rather than a value.
	Key bool
	msg string
	err error // the decoder's error, for Syntax, Shape and Crash
}

func (e *Error) Error() string { return e.msg }
func (e *Error) Unwrap() error { return e.err }

func errorf(kind string, format string, args ...any) *Error {
	return &Error{Kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Unmarshal decodes data into v (a pointer) within o's limits. Every error
// it returns is an *[Error]; ctx ending stops it with a TooSlow error
// wrapping ctx.Err().
func Unmarshal(ctx context.Context, data []byte, v any, o Options) (err error) {
	o = o.withDefaults()
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Kind: Crash, err: fmt.Errorf("%v", r),
				msg: fmt.Sprintf("%s could not be read: the YAML reader failed on it (%v); write it more plainly", o.What, r)}
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if len(data) > o.MaxBytes {
		return errorf(TooLarge, "%s is %s, more than the %s accepted: split it into smaller files", o.What, size(len(data)), size(o.MaxBytes))
	}
	if n := countValues(data, o.MaxValues); n > o.MaxValues {
		return errorf(TooMany, "%s holds more than %d values (keys, items and scalars): split it into smaller files", o.What, o.MaxValues)
	}
	if !utf8.Valid(data) {
		return invalidUTF8(data, o)
	}
	if isJSON(data) {
		return unmarshalJSON(data, v, o)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil // empty: v is left as it was
		}
		return syntaxError(o, err)
	}
	var second yaml.Node
	if err := dec.Decode(&second); err == nil {
		return &Error{Kind: Documents, Line: second.Line,
			msg: fmt.Sprintf("%s holds more than one YAML document (a second starts at line %d after ---): give one", o.What, second.Line)}
	} else if err != io.EOF {
		return syntaxError(o, err)
	}
	if err := check(ctx, &doc, o); err != nil {
		return err
	}
	textTimestamps(&doc)
	if o.Strict {
		if err := checkFields(&doc, v, o); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return slow(o, err)
	}
	if err := doc.Decode(v); err != nil {
		return shapeError(o, err)
	}
	return nil
}

func slow(o Options, err error) *Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: TooSlow, err: err, msg: fmt.Sprintf("%s took longer than %v to read: simplify it or split it into smaller files", o.What, o.Timeout)}
	}
	return &Error{Kind: TooSlow, err: err, msg: fmt.Sprintf("reading %s was stopped: %v", o.What, err)}
}

// syntaxError is the parser's error, without yaml.v3's "yaml: " prefix.
func syntaxError(o Options, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if strings.Contains(msg, "exceeded max depth") {
		// yaml.v3's own bound, 10,000 levels, reached before ours could
		// be checked on the tree.
		return &Error{Kind: TooDeep, err: err, msg: fmt.Sprintf("%s nests more than %d levels deep: flatten it", o.What, o.MaxDepth)}
	}
	return &Error{Kind: Syntax, err: err, msg: fmt.Sprintf("%s is not valid YAML or JSON: %s", o.What, msg)}
}

func shapeError(o Options, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if strings.Contains(msg, "excessive aliasing") {
		// yaml.v3's own bound: past 1,000 values, at most 99 in 100 may
		// come from aliases (fewer in larger documents).
		return &Error{Kind: TooExpanded, err: err,
			msg: fmt.Sprintf("%s takes nearly all its values from aliases (*name) and merge keys (<<): write the values out, or use fewer aliases", o.What)}
	}
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	var lines []string
	for l := range strings.SplitSeq(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, unmarshalText.ReplaceAllStringFunc(l, func(m string) string {
				g := unmarshalText.FindStringSubmatch(m)
				return fmt.Sprintf("%s%s where %s is expected", tagName(g[1]), g[2], typeName(g[3]))
			}))
		}
	}
	return &Error{Kind: Shape, err: err, msg: fmt.Sprintf("%s is not in the expected shape: %s", o.What, strings.Join(lines, "; "))}
}

// unmarshalText is yaml.v3's "cannot unmarshal !!seq into string", with the
// value when it is a scalar ("!!str `abc`").
var unmarshalText = regexp.MustCompile("cannot unmarshal (!!\\w+)( `[^`]*`)? into (\\S+)")

// tagName says a YAML tag as a reader of the file knows it.
func tagName(tag string) string {
	switch tag {
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	case "!!str":
		return "text"
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "true or false"
	case "!!null":
		return "nothing"
	}
	return tag
}

// textTimestamps keeps plain scalars that YAML would read as timestamps
// (2024-01-31) as the text written, the way JSON and the rest of datachat
// see dates: decoded into an interface they would otherwise become
// time.Time.
func textTimestamps(doc *yaml.Node) {
	stack := []*yaml.Node{doc}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.Kind == yaml.ScalarNode && n.Style&yaml.TaggedStyle == 0 && n.ShortTag() == "!!timestamp" {
			n.Tag = "!!str"
		}
		stack = append(stack, n.Content...)
	}
}

func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
