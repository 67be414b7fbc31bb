package yamlsafe

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// checkFields refuses a mapping key that names no field of the struct the
// mapping decodes into (yaml.v3's own KnownFields works only when decoding
// from bytes, and says less). It follows aliases and merge keys, whose
// expansion check has bounded.
func checkFields(doc *yaml.Node, v any, o Options) error {
	type item struct {
		n    *yaml.Node
		t    reflect.Type
		path []string
	}
	t := reflect.TypeOf(v)
	if t == nil {
		return nil
	}
	stack := []item{{n: doc, t: t}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		t := it.t
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if implementsUnmarshaler(t) {
			continue
		}
		n := it.n
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				stack = append(stack, item{c, t, it.path})
			}
		case yaml.AliasNode:
			if n.Alias != nil {
				stack = append(stack, item{n.Alias, t, it.path})
			}
		case yaml.SequenceNode:
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				continue // a shape error the decoder reports
			}
			for i, c := range n.Content {
				stack = append(stack, item{c, t.Elem(), appendPath(it.path, fmt.Sprintf("[%d]", i))})
			}
		case yaml.MappingNode:
			if t.Kind() != reflect.Map && t.Kind() != reflect.Struct {
				continue // a shape error the decoder reports
			}
			var fields map[string]reflect.Type
			if t.Kind() == reflect.Struct {
				fields = fieldsOf(t)
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, val := n.Content[i], n.Content[i+1]
				if isMergeKey(k) {
					for _, m := range mergeTargets(val) {
						stack = append(stack, item{m, t, it.path})
					}
					continue
				}
				if t.Kind() == reflect.Map {
					stack = append(stack, item{val, t.Elem(), appendPath(it.path, k.Value)})
					continue
				}
				f, ok := fields[k.Value]
				if !ok {
					names := slices.Sorted(maps.Keys(fields))
					where := ""
					if len(it.path) > 0 {
						where = " in " + joinPath(it.path)
					}
					return &Error{Kind: UnknownField, Line: k.Line, Path: appendPath(it.path, k.Value), Key: true,
						msg: fmt.Sprintf("%s: line %d: unknown field %q%s (the fields there are %s)", o.What, k.Line, k.Value, where, strings.Join(names, ", "))}
				}
				stack = append(stack, item{val, f, appendPath(it.path, k.Value)})
			}
		}
	}
	return nil
}

// mergeTargets are the mappings a merge key's value merges in: one
// mapping or alias, or a sequence of them.
func mergeTargets(val *yaml.Node) []*yaml.Node {
	if val.Kind == yaml.SequenceNode {
		return val.Content
	}
	return []*yaml.Node{val}
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge")
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

func implementsUnmarshaler(t reflect.Type) bool {
	return t.Kind() == reflect.Interface || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)
}

// fieldsOf returns a struct's YAML keys and their types, as yaml.v3 names
// them: the yaml tag's name, else the field's name in lower case; inline
// structs' fields included.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range fieldsOf(ft) {
					out[k] = v
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func appendPath(p []string, s string) []string {
	return append(p[:len(p):len(p)], s)
}

// joinPath writes a path as datasets.orders.columns[2].
func joinPath(p []string) string {
	var b strings.Builder
	for i, s := range p {
		if i > 0 && !strings.HasPrefix(s, "[") {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}
