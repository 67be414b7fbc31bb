package duckdb

import (
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/google/uuid"

	"datachat"
	"datachat/internal/duckdb/wire"
)

// The type of a saved column, learnt from its values as they are spooled
// (colStats), and the reading of those values as the results write them:
// numbers, decimals, dates, times and timestamps.

// colStats is what the values of one column were, to choose its type.
type colStats struct {
	kind string // the column's friendly type
	// Whether every non-null value so far reads as the type (vacuously
	// true before any).
	int64s, uint64s, floats, decimals, dates, times, timestamps, timestampsTZ, uuids, blobs, bools bool
	intDigits, scale                                                                               int
}

func newColStats(c datachat.Column) colStats {
	return colStats{kind: c.Type, int64s: true, uint64s: true, floats: true, decimals: true,
		dates: true, times: true, timestamps: true, timestampsTZ: true, uuids: true, blobs: true, bools: true}
}

func (c *colStats) see(v any) {
	if v == nil {
		return
	}
	if _, ok := v.(bool); ok {
		c.int64s, c.uint64s, c.floats, c.decimals = false, false, false, false
		c.dates, c.times, c.timestamps, c.timestampsTZ, c.uuids, c.blobs = false, false, false, false, false, false
		return
	}
	c.bools = false
	s, isText := wire.NumberText(v)
	if !isText {
		// A list or another value: only text holds it.
		c.int64s, c.uint64s, c.floats, c.decimals = false, false, false, false
		c.dates, c.times, c.timestamps, c.timestampsTZ, c.uuids, c.blobs = false, false, false, false, false, false
		return
	}
	switch c.kind {
	case datachat.TypeInteger:
		if c.int64s {
			if _, err := strconv.ParseInt(s, 10, 64); err != nil {
				c.int64s = false
			}
		}
		if c.uint64s {
			if _, err := strconv.ParseUint(s, 10, 64); err != nil {
				c.uint64s = false
			}
		}
		// Beyond both, a DECIMAL of no scale: Parquet has no 128-bit
		// integer (DuckDB would write a HUGEINT as a DOUBLE).
		if c.decimals {
			if ip, sc, ok := wire.DecimalDigits(s); ok && sc == 0 {
				c.intDigits = max(c.intDigits, ip)
			} else {
				c.decimals = false
			}
		}
	case datachat.TypeFloat:
		if c.floats {
			if _, ok := wire.ParseFloat(s); !ok {
				c.floats = false
			}
		}
	case datachat.TypeDecimal:
		if c.decimals {
			if ip, sc, ok := wire.DecimalDigits(s); ok {
				c.intDigits, c.scale = max(c.intDigits, ip), max(c.scale, sc)
			} else {
				c.decimals = false
			}
		}
		if c.floats {
			if _, ok := wire.ParseFloat(s); !ok {
				c.floats = false
			}
		}
	case datachat.TypeDate:
		if _, err := wire.ParseDate(s); err != nil {
			c.dates = false
		}
	case datachat.TypeTime:
		if _, err := wire.ParseClock(s); err != nil {
			c.times = false
		}
	case datachat.TypeTimestamp:
		if c.timestamps {
			if _, err := wire.ParseTimestamp(s, false); err != nil {
				c.timestamps = false
			}
		}
		if c.timestampsTZ {
			if _, err := wire.ParseTimestamp(s, true); err != nil {
				c.timestampsTZ = false
			}
		}
	case datachat.TypeUUID:
		if _, err := uuid.Parse(s); err != nil || len(s) != 36 {
			c.uuids = false
		}
	case datachat.TypeBlob:
		if _, err := base64.StdEncoding.DecodeString(s); err != nil {
			c.blobs = false
		}
	}
}

// duckType is the type a column is stored with.
func (c *colStats) duckType() string {
	switch c.kind {
	case datachat.TypeInteger:
		switch {
		case c.int64s:
			return "BIGINT"
		case c.uint64s:
			return "UBIGINT"
		case c.decimals && c.intDigits <= 38:
			return fmt.Sprintf("DECIMAL(%d,0)", max(c.intDigits, 1))
		}
	case datachat.TypeFloat:
		if c.floats {
			return "DOUBLE"
		}
	case datachat.TypeDecimal:
		if w := c.intDigits + c.scale; c.decimals && w <= 38 {
			return fmt.Sprintf("DECIMAL(%d,%d)", max(w, 1), c.scale)
		}
		if c.floats {
			return "DOUBLE"
		}
	case datachat.TypeBoolean:
		if c.bools {
			return "BOOLEAN"
		}
	case datachat.TypeDate:
		if c.dates {
			return "DATE"
		}
	case datachat.TypeTime:
		if c.times {
			return "TIME"
		}
	case datachat.TypeTimestamp:
		switch {
		case c.timestamps:
			return "TIMESTAMP"
		case c.timestampsTZ:
			return "TIMESTAMPTZ"
		}
	case datachat.TypeUUID:
		if c.uuids {
			return "UUID"
		}
	case datachat.TypeBlob:
		if c.blobs {
			return "BLOB"
		}
	}
	return "VARCHAR"
}
