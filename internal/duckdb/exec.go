package duckdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	bindings "github.com/duckdb/duckdb-go-bindings"
	"github.com/duckdb/duckdb-go/v2/mapping"

	"datachat"
)

// limits of one query's result in Go memory.
type resultLimits struct {
	maxRows  int
	maxCell  int
	maxBytes int
}

// query runs one checked statement and streams at most maxRows+1 rows out of
// DuckDB: the rest of the result is never produced.
func (in *instance) query(ctx context.Context, sql string, lim resultLimits) (*Result, error) {
	var out *Result
	err := in.withConn(ctx, func(conn mapping.Connection) error {
		p, err := prepare(conn, sql)
		if err != nil {
			return err
		}
		defer p.close()
		start := time.Now()
		var res mapping.Result
		// duckdb-go's database/sql driver materialises every result; a
		// streaming result lets us stop after maxRows+1 rows.
		state := bindings.ExecutePreparedStreaming(p.stmt, &res)
		defer mapping.DestroyResult(&res)
		if state == mapping.StateError {
			return classify(mapping.ResultErrorType(&res), mapping.ResultError(&res))
		}
		r := &Result{Rows: [][]any{}}
		n := int(mapping.ColumnCount(&res))
		decoders := make([]*decoder, n)
		for i := range n {
			lt := mapping.ColumnLogicalType(&res, mapping.IdxT(i))
			decoders[i] = newDecoder(lt)
			mapping.DestroyLogicalType(&lt)
			name := mapping.ColumnName(&res, mapping.IdxT(i))
			r.Columns = append(r.Columns, datachat.Column{Name: name, SQLType: decoders[i].sqlType, Type: FriendlyType(decoders[i].sqlType)})
			if u := decoders[i].unsupported(); u != "" {
				return &QueryError{Kind: KindTypeMismatch, Message: fmt.Sprintf("column %q has type %s, which cannot be returned; cast it, e.g. CAST(%s AS VARCHAR)", name, u, QuoteIdent(name))}
			}
		}
		cl := cellLimits{maxCell: lim.maxCell}
		views := make([]*view, n)
	fetch:
		for {
			chunk := mapping.FetchChunk(res)
			if chunk.Ptr == nil {
				if msg := mapping.ResultError(&res); msg != "" {
					return classify(mapping.ResultErrorType(&res), msg)
				}
				break
			}
			size := uint64(mapping.DataChunkGetSize(chunk))
			if size == 0 {
				mapping.DestroyDataChunk(&chunk)
				break
			}
			for i, d := range decoders {
				views[i] = d.bind(mapping.DataChunkGetVector(chunk, mapping.IdxT(i)))
			}
			for row := range size {
				if len(r.Rows) >= lim.maxRows || cl.bytes > lim.maxBytes {
					r.Truncated = true
					mapping.DestroyDataChunk(&chunk)
					break fetch
				}
				vals := make([]any, n)
				for i, v := range views {
					vals[i] = v.value(row, &cl)
				}
				r.Rows = append(r.Rows, vals)
			}
			mapping.DestroyDataChunk(&chunk)
		}
		r.Truncated = r.Truncated || cl.cut
		r.RowCount = len(r.Rows)
		r.ElapsedMS = float64(time.Since(start).Microseconds()) / 1000
		out = r
		return nil
	})
	return out, err
}

// estimate returns DuckDB's estimate of how many rows a SELECT returns, from
// the root of its EXPLAIN (FORMAT json) plan.
func (in *instance) estimate(ctx context.Context, sql string) (int64, error) {
	var n int64
	err := in.withConn(ctx, func(conn mapping.Connection) error {
		p, err := prepare(conn, sql)
		if err != nil {
			return err
		}
		explain := p.explain
		p.close()
		if explain {
			return refused("give EstimateRows the SELECT itself, not an EXPLAIN")
		}
		q := "EXPLAIN (FORMAT json) " + strings.TrimRight(strings.TrimSpace(sql), ";")
		var res mapping.Result
		defer mapping.DestroyResult(&res)
		if mapping.Query(conn, q, &res) == mapping.StateError {
			return classify(mapping.ResultErrorType(&res), mapping.ResultError(&res))
		}
		chunk := mapping.FetchChunk(res)
		if chunk.Ptr == nil {
			return errors.New("explain returned no plan")
		}
		defer mapping.DestroyDataChunk(&chunk)
		if mapping.DataChunkGetSize(chunk) < 1 || mapping.DataChunkGetColumnCount(chunk) < 2 {
			return errors.New("explain returned no plan")
		}
		v := (&decoder{id: mapping.TypeVarchar}).bind(mapping.DataChunkGetVector(chunk, 1))
		n, err = planCardinality(v.str(0))
		return err
	})
	return n, err
}

// planCardinality estimates the rows a JSON physical plan returns: the root's
// "Estimated Cardinality" when DuckDB gives one, else derived from its children
// (a product for joins, 1 for an ungrouped aggregate, a sum for a union, else
// the largest child).
func planCardinality(plan []byte) (int64, error) {
	var roots []planNode
	if err := json.Unmarshal(plan, &roots); err != nil {
		return 0, fmt.Errorf("read explain plan: %w", err)
	}
	if len(roots) == 0 {
		return 0, errors.New("the plan is empty")
	}
	return roots[0].rows(), nil
}

type planNode struct {
	Name      string         `json:"name"`
	Children  []planNode     `json:"children"`
	ExtraInfo map[string]any `json:"extra_info"`
}

func (n *planNode) rows() int64 {
	if s, ok := n.ExtraInfo["Estimated Cardinality"].(string); ok {
		// LIMIT nodes report 0: derive those from their input instead.
		if v, err := strconv.ParseInt(strings.TrimPrefix(s, "~"), 10, 64); err == nil && (v > 0 || len(n.Children) == 0) {
			return v
		}
	}
	kids := make([]int64, len(n.Children))
	for i := range n.Children {
		kids[i] = n.Children[i].rows()
	}
	const most = 1 << 62
	switch {
	case n.Name == "UNGROUPED_AGGREGATE":
		return 1
	case n.Name == "CROSS_PRODUCT" || strings.Contains(n.Name, "JOIN"):
		p := int64(1)
		for _, k := range kids {
			if k != 0 && p > most/k {
				return most
			}
			p *= k
		}
		return p
	case strings.Contains(n.Name, "UNION"):
		var s int64
		for _, k := range kids {
			s = min(s+k, most)
		}
		return s
	}
	var m int64
	for _, k := range kids {
		m = max(m, k)
	}
	return m
}
