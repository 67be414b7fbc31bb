package yamlsafe

import (
	"context"
	"fmt"
	"math"

	"go.yaml.in/yaml/v3"
)

// cost is what decoding a node takes once its aliases and merge keys are
// expanded: nodes, the nesting below it, and the key comparisons
// yaml.v3's decoder makes (it compares each key of a mapping with every
// later one, and on a merge decodes the keys of the mapping merged into).
// Each saturates at its limit + 1.
type cost struct {
	nodes, height, pairs int
}

// visit states of an anchored node while its cost is computed.
const (
	unvisited = iota
	inProgress
	done
)

// check walks the tree iteratively, refusing it when the expanded cost of
// the document passes o's limits or an alias is inside its own anchor.
// Aliases are resolved by the parser (n.Alias); each anchor's cost is
// computed once and added at every alias to it.
func check(ctx context.Context, doc *yaml.Node, o Options) error {
	state := map[*yaml.Node]int{}
	memo := map[*yaml.Node]cost{}
	stack := []frame{{n: doc}}
	for steps := 1; len(stack) > 0; steps++ {
		if steps%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return slow(o, err)
			}
		}
		top := &stack[len(stack)-1]
		n := top.n
		if top.next == 0 {
			// The document node is not a level: the top mapping is level 1.
			if len(stack)-1 > o.MaxDepth && (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) {
				return &Error{Kind: TooDeep, Line: n.Line,
					msg: fmt.Sprintf("%s nests more than %d levels deep (at line %d): flatten it", o.What, o.MaxDepth, n.Line)}
			}
			if n.Kind == yaml.AliasNode {
				c, err := aliasCost(n, state, memo, o)
				if err != nil {
					return err
				}
				stack = finish(stack, c, o)
				continue
			}
			if n.Anchor != "" {
				state[n] = inProgress
			}
		}
		if top.next < len(n.Content) {
			child := n.Content[top.next]
			top.next++
			stack = append(stack, frame{n: child})
			continue
		}
		c := top.acc
		c.nodes = add(c.nodes, 1, o.MaxExpanded)
		if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
			c.height++
		}
		if n.Kind == yaml.MappingNode {
			keys := len(n.Content) / 2
			c.pairs = add(c.pairs, keys*(keys-1)/2, o.MaxKeyPairs)
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "<<" {
					c.pairs = add(c.pairs, keys, o.MaxKeyPairs) // the merge decodes our keys again
				}
			}
		}
		if n.Anchor != "" {
			state[n] = done
			memo[n] = c
		}
		if err := over(c, n, o); err != nil {
			return err
		}
		stack = finish(stack, c, o)
	}
	return nil
}

type frame struct {
	n    *yaml.Node
	next int  // the next child to visit
	acc  cost // of the children visited so far
}

// finish pops the top frame, whose cost is c, and adds c to its parent's.
func finish(stack []frame, c cost, o Options) []frame {
	stack = stack[:len(stack)-1]
	if len(stack) > 0 {
		p := &stack[len(stack)-1].acc
		p.nodes = add(p.nodes, c.nodes, o.MaxExpanded)
		p.pairs = add(p.pairs, c.pairs, o.MaxKeyPairs)
		p.height = max(p.height, c.height)
	}
	return stack
}

// aliasCost is the cost of an alias: its anchor's, which the walk has
// finished (aliases follow their anchors in the document) unless the alias
// is inside it.
func aliasCost(n *yaml.Node, state map[*yaml.Node]int, memo map[*yaml.Node]cost, o Options) (cost, error) {
	a := n.Alias
	if a == nil {
		return cost{nodes: 1}, nil
	}
	switch state[a] {
	case inProgress:
		return cost{}, &Error{Kind: TooExpanded, Line: n.Line,
			msg: fmt.Sprintf("%s has an alias *%s inside its own anchor &%s (line %d), which never ends: write the value out", o.What, n.Value, a.Anchor, n.Line)}
	case done:
		c := memo[a]
		c.nodes = add(c.nodes, 1, o.MaxExpanded)
		return c, over(c, n, o)
	}
	// Not reached with yaml.v3's parser, which resolves an alias only to
	// an anchor before it; refuse rather than walk an unknown graph.
	return cost{}, &Error{Kind: TooExpanded, Line: n.Line,
		msg: fmt.Sprintf("%s has an alias *%s before its anchor (line %d): define the anchor first", o.What, n.Value, n.Line)}
}

// over returns the error for the first limit c passes.
func over(c cost, n *yaml.Node, o Options) error {
	switch {
	case c.height > o.MaxDepth:
		return &Error{Kind: TooDeep, Line: n.Line,
			msg: fmt.Sprintf("%s nests more than %d levels deep once its aliases are expanded (line %d): flatten it", o.What, o.MaxDepth, n.Line)}
	case c.nodes > o.MaxExpanded:
		return &Error{Kind: TooExpanded, Line: n.Line,
			msg: fmt.Sprintf("%s expands to more than %d values through its aliases (*name) and merge keys (<<) (line %d): write the values out, or use fewer aliases", o.What, o.MaxExpanded, n.Line)}
	case c.pairs > o.MaxKeyPairs:
		return &Error{Kind: TooManyKeys, Line: n.Line,
			msg: fmt.Sprintf("%s has mappings with too many keys to check (line %d; about %d keys in one mapping at most, fewer with aliases): split it into smaller files", o.What, n.Line, isqrt(2*o.MaxKeyPairs))}
	}
	return nil
}

// add returns a+b, saturating at limit+1.
func add(a, b, limit int) int {
	if a > limit || b > limit || a+b > limit {
		return limit + 1
	}
	return a + b
}

func isqrt(n int) int { return int(math.Sqrt(float64(n))) }
