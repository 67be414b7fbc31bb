package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	bindings "github.com/duckdb/duckdb-go-bindings"
	"github.com/duckdb/duckdb-go/v2/mapping"

	"datachat"
	"datachat/internal/duckdb/wire"
)

// query runs one checked statement and streams at most maxRows+1 rows out of
// DuckDB: the rest of the result is never produced.
func (in *instance) query(ctx context.Context, sql string, lim wire.ResultLimits) (*wire.Result, error) {
	var out *wire.Result
	err := in.withConn(ctx, func(conn mapping.Connection) error {
		c, err := in.check(conn, sql)
		if err != nil {
			return err
		}
		defer c.close()
		start := time.Now()
		var res mapping.Result
		// duckdb-go's database/sql driver materialises every result; a
		// streaming result lets us stop after maxRows+1 rows.
		state := bindings.ExecutePreparedStreaming(c.stmt, &res)
		defer mapping.DestroyResult(&res)
		if state == mapping.StateError {
			return classify(mapping.ResultErrorType(&res), mapping.ResultError(&res))
		}
		r, err := fetch(res, lim)
		if err != nil {
			return err
		}
		r.ElapsedMS = float64(time.Since(start).Microseconds()) / 1000
		out = r
		return nil
	})
	return out, err
}

// fetch reads a streaming result into a Result within lim.
func fetch(res mapping.Result, lim wire.ResultLimits) (*wire.Result, error) {
	r := &wire.Result{Rows: [][]any{}}
	n := int(mapping.ColumnCount(&res))
	decoders := make([]*decoder, n)
	for i := range n {
		lt := mapping.ColumnLogicalType(&res, mapping.IdxT(i))
		decoders[i] = newDecoder(lt)
		mapping.DestroyLogicalType(&lt)
		name := mapping.ColumnName(&res, mapping.IdxT(i))
		r.Columns = append(r.Columns, datachat.Column{Name: name, SQLType: decoders[i].sqlType, Type: wire.FriendlyType(decoders[i].sqlType)})
		if u := decoders[i].unsupported(); u != "" {
			return nil, &datachat.QueryError{Kind: datachat.KindTypeMismatch, Message: fmt.Sprintf("column %q has type %s, which cannot be returned; cast it, e.g. CAST(%s AS VARCHAR)", name, u, datachat.QuoteIdent(name))}
		}
	}
	cl := cellLimits{maxCell: lim.MaxCell, maxBytes: lim.MaxBytes}
	if cl.maxCell <= 0 {
		cl.maxCell = math.MaxInt
	}
	views := make([]*view, n)
	for {
		chunk := mapping.FetchChunk(res)
		if chunk.Ptr == nil {
			if msg := mapping.ResultError(&res); msg != "" {
				return nil, classify(mapping.ResultErrorType(&res), msg)
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
		full := false
		for row := range size {
			if lim.MaxRows >= 0 && len(r.Rows) >= lim.MaxRows || lim.MaxBytes > 0 && cl.bytes >= lim.MaxBytes {
				r.Truncated = true
				full = true
				break
			}
			vals := make([]any, n)
			for i, v := range views {
				vals[i] = v.value(row, &cl)
			}
			r.Rows = append(r.Rows, vals)
		}
		mapping.DestroyDataChunk(&chunk)
		if full {
			break
		}
	}
	r.Truncated = r.Truncated || cl.cut
	r.RowCount = len(r.Rows)
	return r, nil
}

// queryAll runs a query of our own — exactly one statement, the values in
// params bound to $1, $2… as text — and returns at most maxRows rows (-1: all).
func queryAll(conn mapping.Connection, sql string, maxRows int, params []string) (*wire.Result, error) {
	if strings.IndexByte(sql, 0) >= 0 {
		return nil, errors.New("a query of our own contains a NUL byte")
	}
	var ext mapping.ExtractedStatements
	n := mapping.ExtractStatements(conn, sql, &ext)
	defer mapping.DestroyExtracted(&ext)
	if n != 1 {
		if msg := mapping.ExtractStatementsError(ext); msg != "" {
			return nil, errors.New(msg)
		}
		return nil, fmt.Errorf("a query of our own parsed as %d statements", n)
	}
	var stmt mapping.PreparedStatement
	defer mapping.DestroyPrepare(&stmt)
	if mapping.PrepareExtractedStatement(conn, ext, 0, &stmt) == mapping.StateError {
		return nil, newDuckError(mapping.ErrorTypeInvalid, mapping.PrepareError(stmt))
	}
	for i, p := range params {
		if mapping.BindVarchar(stmt, mapping.IdxT(i+1), p) == mapping.StateError {
			return nil, fmt.Errorf("bind parameter %d", i+1)
		}
	}
	var res mapping.Result
	state := bindings.ExecutePreparedStreaming(stmt, &res)
	defer mapping.DestroyResult(&res)
	if state == mapping.StateError {
		return nil, newDuckError(mapping.ResultErrorType(&res), mapping.ResultError(&res))
	}
	r, err := fetch(res, wire.ResultLimits{MaxRows: maxRows})
	if err != nil {
		var qe *datachat.QueryError
		if errors.As(err, &qe) {
			return nil, newDuckError(mapping.ErrorTypeInvalid, qe.Message)
		}
		return nil, err
	}
	return r, nil
}

// estimate returns DuckDB's estimate of how many rows a SELECT returns, from
// the root of its EXPLAIN (FORMAT json) plan: an EXPLAIN the sandbox builds
// around the checked SELECT.
func (in *instance) estimate(ctx context.Context, sql string) (int64, error) {
	var n int64
	err := in.withConn(ctx, func(conn mapping.Connection) error {
		if strings.IndexByte(sql, 0) >= 0 {
			return &datachat.QueryError{Kind: datachat.KindSyntax, Message: "the query contains a NUL byte"}
		}
		if err := in.checkSelect(conn, sql); err != nil {
			var te *treeError
			if errors.As(err, &te) && te.notSelect() {
				return refused("only a SELECT can be estimated; " + OnlySelect)
			}
			return err
		}
		c, err := prepareOne(conn, "EXPLAIN (FORMAT json) "+sql, mapping.StatementTypeExplain)
		if err != nil {
			return err
		}
		defer c.close()
		var res mapping.Result
		state := bindings.ExecutePreparedStreaming(c.stmt, &res)
		defer mapping.DestroyResult(&res)
		if state == mapping.StateError {
			return classify(mapping.ResultErrorType(&res), mapping.ResultError(&res))
		}
		r, err := fetch(res, wire.ResultLimits{MaxRows: 1})
		if err != nil {
			return err
		}
		if len(r.Rows) < 1 || len(r.Columns) < 2 {
			return errors.New("explain returned no plan")
		}
		plan, _ := r.Rows[0][1].(string)
		n, err = planCardinality([]byte(plan))
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
