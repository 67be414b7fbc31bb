package retrieval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"datachat"
)

// CheckFilters validates metadata filters from a user (a request's
// metadata_filters) against the allow-list (CHAT_ALLOWED_METADATA_KEYS): each
// key must be in allowed — an empty list allows none — and each value a
// string or a non-empty list of strings (numbers and booleans are taken as
// their text), checked before [Index.Query].
//
// A filter matches a chunk when the chunk's value for the key is one of the
// given values; all filters must match. Keys: "document" (file name),
// "document_id", "page" (a page number), "section" (the full heading path),
// and any key of the document's own metadata.
//
// It is the one rule for filters from outside: /chat/query and the search
// endpoint both call it.
//
// Errors: EINVALID naming the key that is not allowed (and the keys that
// are, or that none are) or the malformed filter.
func CheckFilters(filters map[string]any, allowed []string) error {
	keys := make([]string, 0, len(filters))
	for k := range filters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if slices.Contains(allowed, k) {
			continue
		}
		if len(allowed) == 0 {
			return datachat.Errorf(datachat.EINVALID, "Metadata filter key %q is not allowed: no filter keys are enabled (CHAT_ALLOWED_METADATA_KEYS).", k)
		}
		return datachat.Errorf(datachat.EINVALID, "Metadata filter key %q is not allowed; allowed keys: %s.", k, strings.Join(allowed, ", "))
	}
	_, err := ParseFilters(filters)
	return err
}

// Filters is a parsed filter map (see [CheckFilters]). A nil slice is no
// condition; all conditions must hold.
type Filters struct {
	Documents   []string            // "document": file names
	DocumentIDs []string            // "document_id"
	Pages       []int               // "page": page numbers; empty (not nil) when no value was a page number, so nothing matches
	Sections    []string            // "section": full heading paths
	Meta        map[string][]string // the documents' own metadata
}

// ByDocument reports whether the filters select documents (by name, id or
// metadata) rather than only pages or sections.
func (f Filters) ByDocument() bool {
	return f.Documents != nil || f.DocumentIDs != nil || len(f.Meta) > 0
}

// ParseFilters reads a filter map without checking its keys against an
// allow-list (that is [CheckFilters]). Errors: EINVALID naming the malformed
// filter.
func ParseFilters(m map[string]any) (Filters, error) {
	var f Filters
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		vals, err := filterValues(k, m[k])
		if err != nil {
			return Filters{}, err
		}
		switch k {
		case MetaDocument:
			f.Documents = vals
		case MetaDocumentID:
			f.DocumentIDs = vals
		case MetaSection:
			f.Sections = vals
		case MetaPage:
			f.Pages = []int{}
			for _, v := range vals {
				if n, ok := parsePage(v); ok {
					f.Pages = append(f.Pages, n)
				}
			}
		case MetaChunk:
			return Filters{}, datachat.Errorf(datachat.EINVALID, "Metadata filter key %q is not supported.", k)
		default:
			if f.Meta == nil {
				f.Meta = map[string][]string{}
			}
			f.Meta[k] = vals
		}
	}
	return f, nil
}

func filterValues(key string, v any) ([]string, error) {
	bad := datachat.Errorf(datachat.EINVALID, "Metadata filter %q: the value must be a string, a number or a list of them.", key)
	switch v := v.(type) {
	case []string:
		if len(v) == 0 {
			return nil, datachat.Errorf(datachat.EINVALID, "Metadata filter %q: the list of values is empty; give at least one.", key)
		}
		return slices.Clone(v), nil
	case []any:
		if len(v) == 0 {
			return nil, datachat.Errorf(datachat.EINVALID, "Metadata filter %q: the list of values is empty; give at least one.", key)
		}
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := scalarString(e)
			if !ok {
				return nil, bad
			}
			out = append(out, s)
		}
		return out, nil
	default:
		s, ok := scalarString(v)
		if !ok {
			return nil, bad
		}
		return []string{s}, nil
	}
}

func scalarString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "", false
		}
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case int:
		return strconv.Itoa(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// matchDocuments returns the ids of the conversation's documents that pass
// the document-level filters, or nil when there are none.
func (ix *Index) matchDocuments(ctx context.Context, conversationID string, f Filters) ([]string, error) {
	if !f.ByDocument() {
		return nil, nil
	}
	rows, err := ix.read.QueryContext(ctx, `SELECT d.id, d.name, m.key, m.value FROM documents d
		LEFT JOIN document_metadata m ON m.conversation_id = d.conversation_id AND m.document_id = d.id
		WHERE d.conversation_id = ? ORDER BY d.id`, conversationID)
	if err != nil {
		return nil, fmt.Errorf("filter documents: %w", err)
	}
	defer rows.Close()
	type docMeta struct {
		name string
		meta map[string]string
	}
	docs := map[string]*docMeta{}
	var order []string
	for rows.Next() {
		var id, name string
		var k, v *string
		if err := rows.Scan(&id, &name, &k, &v); err != nil {
			return nil, fmt.Errorf("filter documents: %w", err)
		}
		d := docs[id]
		if d == nil {
			d = &docMeta{name: name, meta: map[string]string{}}
			docs[id] = d
			order = append(order, id)
		}
		if k != nil && v != nil {
			d.meta[*k] = *v
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("filter documents: %w", err)
	}
	out := []string{}
	for _, id := range order {
		if d := docs[id]; f.MatchDocument(d.name, id, d.meta) {
			out = append(out, id)
		}
	}
	return out, nil
}

// MatchDocument reports whether a document passes the document-level
// filters (name, id, metadata).
func (f Filters) MatchDocument(name, id string, meta map[string]string) bool {
	if f.Documents != nil && !slices.Contains(f.Documents, name) {
		return false
	}
	if f.DocumentIDs != nil && !slices.Contains(f.DocumentIDs, id) {
		return false
	}
	for k, vals := range f.Meta {
		v, has := meta[k]
		if !has || !slices.Contains(vals, v) {
			return false
		}
	}
	return true
}

// MatchChunk reports whether a chunk on page (0: none) under the heading path
// section passes the page and section filters.
func (f Filters) MatchChunk(page int, section string) bool {
	return (f.Pages == nil || slices.Contains(f.Pages, page)) && (f.Sections == nil || slices.Contains(f.Sections, section))
}

// keeper returns the test a chunk of ci must pass: in one of docs (nil: any
// document), and on one of the filtered pages and sections. It returns nil
// when nothing is filtered. The caller holds ci.mu.
func (f Filters) keeper(ci *convIndex, docs []string) func(c int) bool {
	if docs == nil && f.Pages == nil && f.Sections == nil {
		return nil
	}
	var allowed []bool
	if docs != nil {
		allowed = make([]bool, len(ci.docIDs))
		for _, d := range docs {
			if i, ok := ci.docIdx[d]; ok {
				allowed[i] = true
			}
		}
	}
	return func(c int) bool {
		if allowed != nil && !allowed[ci.docs[c]] {
			return false
		}
		if f.Pages != nil && !slices.Contains(f.Pages, int(ci.pages[c])) {
			return false
		}
		if f.Sections != nil && !slices.Contains(f.Sections, ci.headings[c]) {
			return false
		}
		return true
	}
}
