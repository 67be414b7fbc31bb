package worker

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"datachat/internal/duckdb/wire"
	"datachat/internal/sqlvalue"

	"github.com/duckdb/duckdb-go/v2/mapping"
)

// A decoder turns the values of one DuckDB vector into JSON-ready Go values, :
// nil, bool, int64 (|v| ≤ 2^53), json.Number (finite
// floats), string (DECIMAL, large integers, NaN/±Inf, text, dates and times,
// base64 BLOBs, UUIDs), []any (LIST, ARRAY) and wire.Object (STRUCT, MAP, UNION).
//
// Vectors are read straight from DuckDB's memory, as duckdb-go's own getters do:
// the layouts are those of DuckDB's C API (duckdb.h).
type decoder struct {
	id        mapping.Type
	sqlType   string
	scale     int          // DECIMAL
	internal  mapping.Type // DECIMAL and ENUM storage type
	dict      []string     // ENUM
	names     []string     // STRUCT fields, UNION members
	children  []*decoder   // LIST/ARRAY element; STRUCT fields; MAP key, value; UNION members
	arraySize uint64
}

func newDecoder(lt mapping.LogicalType) *decoder {
	d := &decoder{id: mapping.GetTypeId(lt), sqlType: sqlType(lt)}
	switch d.id {
	case mapping.TypeDecimal:
		d.scale = int(mapping.DecimalScale(lt))
		d.internal = mapping.DecimalInternalType(lt)
	case mapping.TypeEnum:
		d.internal = mapping.EnumInternalType(lt)
		n := int(mapping.EnumDictionarySize(lt))
		d.dict = make([]string, n)
		for i := range n {
			d.dict[i] = mapping.EnumDictionaryValue(lt, mapping.IdxT(i))
		}
	case mapping.TypeList:
		child := mapping.ListTypeChildType(lt)
		d.children = []*decoder{newDecoder(child)}
		mapping.DestroyLogicalType(&child)
	case mapping.TypeArray:
		child := mapping.ArrayTypeChildType(lt)
		d.children = []*decoder{newDecoder(child)}
		d.arraySize = uint64(mapping.ArrayTypeArraySize(lt))
		mapping.DestroyLogicalType(&child)
	case mapping.TypeMap:
		k := mapping.MapTypeKeyType(lt)
		v := mapping.MapTypeValueType(lt)
		d.children = []*decoder{newDecoder(k), newDecoder(v)}
		mapping.DestroyLogicalType(&k)
		mapping.DestroyLogicalType(&v)
	case mapping.TypeStruct:
		for i := range int(mapping.StructTypeChildCount(lt)) {
			child := mapping.StructTypeChildType(lt, mapping.IdxT(i))
			d.names = append(d.names, mapping.StructTypeChildName(lt, mapping.IdxT(i)))
			d.children = append(d.children, newDecoder(child))
			mapping.DestroyLogicalType(&child)
		}
	case mapping.TypeUnion:
		for i := range int(mapping.UnionTypeMemberCount(lt)) {
			child := mapping.UnionTypeMemberType(lt, mapping.IdxT(i))
			d.names = append(d.names, mapping.UnionTypeMemberName(lt, mapping.IdxT(i)))
			d.children = append(d.children, newDecoder(child))
			mapping.DestroyLogicalType(&child)
		}
	}
	return d
}

// unsupported returns the SQL type of the first type in d that cannot be
// returned, or "".
func (d *decoder) unsupported() string {
	switch d.id {
	case mapping.TypeBoolean, mapping.TypeTinyInt, mapping.TypeSmallInt, mapping.TypeInteger,
		mapping.TypeBigInt, mapping.TypeUTinyInt, mapping.TypeUSmallInt, mapping.TypeUInteger,
		mapping.TypeUBigInt, mapping.TypeHugeInt, mapping.TypeUHugeInt, mapping.TypeFloat,
		mapping.TypeDouble, mapping.TypeDecimal, mapping.TypeVarchar, mapping.TypeBlob,
		mapping.TypeDate, mapping.TypeTime, mapping.TypeTimeNS, mapping.TypeTimeTZ,
		mapping.TypeTimestamp, mapping.TypeTimestampS, mapping.TypeTimestampMS,
		mapping.TypeTimestampNS, mapping.TypeTimestampTZ, mapping.TypeInterval, mapping.TypeUUID,
		mapping.TypeEnum, mapping.TypeBit, mapping.TypeBigNum, mapping.TypeSQLNull,
		mapping.TypeList, mapping.TypeArray, mapping.TypeMap, mapping.TypeStruct, mapping.TypeUnion:
	default:
		return d.sqlType
	}
	if d.id == mapping.TypeDecimal {
		switch d.internal {
		case mapping.TypeSmallInt, mapping.TypeInteger, mapping.TypeBigInt, mapping.TypeHugeInt:
		default:
			return d.sqlType
		}
	}
	for _, c := range d.children {
		if u := c.unsupported(); u != "" {
			return u
		}
	}
	return ""
}

// view is a decoder bound to one vector of a fetched chunk.
type view struct {
	d        *decoder
	data     unsafe.Pointer
	mask     unsafe.Pointer
	children []*view
}

func (d *decoder) bind(vec mapping.Vector) *view {
	v := &view{d: d, data: mapping.VectorGetData(vec), mask: mapping.VectorGetValidity(vec)}
	switch d.id {
	case mapping.TypeList:
		v.children = []*view{d.children[0].bind(mapping.ListVectorGetChild(vec))}
	case mapping.TypeArray:
		v.children = []*view{d.children[0].bind(mapping.ArrayVectorGetChild(vec))}
	case mapping.TypeMap:
		entries := mapping.ListVectorGetChild(vec) // STRUCT(key, value)
		v.children = []*view{
			d.children[0].bind(mapping.StructVectorGetChild(entries, 0)),
			d.children[1].bind(mapping.StructVectorGetChild(entries, 1)),
		}
	case mapping.TypeStruct:
		for i, c := range d.children {
			v.children = append(v.children, c.bind(mapping.StructVectorGetChild(vec, mapping.IdxT(i))))
		}
	case mapping.TypeUnion:
		// A UNION is a STRUCT whose first child is the tag.
		v.children = append(v.children, (&decoder{id: mapping.TypeUTinyInt}).bind(mapping.StructVectorGetChild(vec, 0)))
		for i, c := range d.children {
			v.children = append(v.children, c.bind(mapping.StructVectorGetChild(vec, mapping.IdxT(i+1))))
		}
	}
	return v
}

// cellLimits bounds what one result may hold in Go memory.
type cellLimits struct {
	maxCell  int  // bytes of one text or blob value
	maxBytes int  // bytes of all the values (0: no bound)
	cut      bool // set when a value was cut
	bytes    int  // running size estimate of the decoded values
}

// room is how many bytes the next text or blob value may keep: a cell's
// bound, or what is left of the result's, whichever is less — so one wide
// row cannot take the result past its bound between two rows.
func (l *cellLimits) room() int {
	if l.maxBytes <= 0 {
		return l.maxCell
	}
	return max(0, min(l.maxCell, l.maxBytes-l.bytes))
}

func (v *view) valid(row uint64) bool {
	if v.mask == nil {
		return true
	}
	e := *(*uint64)(unsafe.Add(v.mask, (row/64)*8))
	return e&(1<<(row%64)) != 0
}

func at[T any](p unsafe.Pointer, row uint64) T {
	var zero T
	return *(*T)(unsafe.Add(p, uintptr(row)*unsafe.Sizeof(zero)))
}

// str returns the bytes of the duckdb_string_t at row, without copying.
func (v *view) str(row uint64) []byte {
	s := unsafe.Add(v.data, uintptr(row)*16)
	n := int(*(*uint32)(s))
	if n == 0 {
		return nil
	}
	var p unsafe.Pointer
	if n <= 12 {
		p = unsafe.Add(s, 4)
	} else {
		p = *(*unsafe.Pointer)(unsafe.Add(s, 8))
	}
	return unsafe.Slice((*byte)(p), n)
}

type hugeint struct {
	lower uint64
	upper int64
}

func (h hugeint) big() *big.Int {
	b := big.NewInt(h.upper)
	b.Lsh(b, 64)
	return b.Add(b, new(big.Int).SetUint64(h.lower))
}

func (h hugeint) ubig() *big.Int {
	b := new(big.Int).SetUint64(uint64(h.upper))
	b.Lsh(b, 64)
	return b.Add(b, new(big.Int).SetUint64(h.lower))
}

func bigValue(b *big.Int) any {
	if b.IsInt64() {
		return sqlvalue.Int(b.Int64())
	}
	return b.String()
}

func decimalString(digits string, scale int) string {
	neg := strings.HasPrefix(digits, "-")
	if neg {
		digits = digits[1:]
	}
	if scale > 0 {
		if len(digits) <= scale {
			digits = strings.Repeat("0", scale-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

func (l *cellLimits) text(b []byte) string {
	room := l.room()
	if len(b) <= room {
		l.bytes += len(b)
		return string(b)
	}
	b = b[:sqlvalue.Cut(b, room)]
	l.cut = true
	l.bytes += len(b)
	return string(b) + "…"
}

func (l *cellLimits) blob(b []byte) string {
	room := l.maxCell
	if l.maxBytes > 0 {
		room = max(0, min(room, (l.maxBytes-l.bytes)*3/4)) // base64 takes 4 bytes for 3
	}
	if len(b) > room {
		b = b[:room]
		l.cut = true
	}
	l.bytes += len(b) * 4 / 3
	return base64.StdEncoding.EncodeToString(b)
}

// value returns the JSON-ready value at row.
func (v *view) value(row uint64, l *cellLimits) any {
	if !v.valid(row) {
		return nil
	}
	l.bytes += 8
	switch v.d.id {
	case mapping.TypeSQLNull:
		return nil
	case mapping.TypeBoolean:
		return at[bool](v.data, row)
	case mapping.TypeTinyInt:
		return int64(at[int8](v.data, row))
	case mapping.TypeSmallInt:
		return int64(at[int16](v.data, row))
	case mapping.TypeInteger:
		return int64(at[int32](v.data, row))
	case mapping.TypeBigInt:
		return sqlvalue.Int(at[int64](v.data, row))
	case mapping.TypeUTinyInt:
		return int64(at[uint8](v.data, row))
	case mapping.TypeUSmallInt:
		return int64(at[uint16](v.data, row))
	case mapping.TypeUInteger:
		return int64(at[uint32](v.data, row))
	case mapping.TypeUBigInt:
		return sqlvalue.Uint(at[uint64](v.data, row))
	case mapping.TypeHugeInt:
		return bigValue(at[hugeint](v.data, row).big())
	case mapping.TypeUHugeInt:
		return bigValue(at[hugeint](v.data, row).ubig())
	case mapping.TypeFloat:
		return sqlvalue.Float(float64(at[float32](v.data, row)), 32)
	case mapping.TypeDouble:
		return sqlvalue.Float(at[float64](v.data, row), 64)
	case mapping.TypeDecimal:
		var digits string
		switch v.d.internal {
		case mapping.TypeSmallInt:
			digits = strconv.FormatInt(int64(at[int16](v.data, row)), 10)
		case mapping.TypeInteger:
			digits = strconv.FormatInt(int64(at[int32](v.data, row)), 10)
		case mapping.TypeBigInt:
			digits = strconv.FormatInt(at[int64](v.data, row), 10)
		default:
			digits = at[hugeint](v.data, row).big().String()
		}
		return decimalString(digits, v.d.scale)
	case mapping.TypeVarchar:
		return l.text(v.str(row))
	case mapping.TypeBlob:
		return l.blob(v.str(row))
	case mapping.TypeBit:
		return bitString(v.str(row))
	case mapping.TypeBigNum:
		return bigValue(bigNum(v.str(row)))
	case mapping.TypeDate:
		return formatDate(at[int32](v.data, row))
	case mapping.TypeTime:
		return formatClock(at[int64](v.data, row)*1000, 6)
	case mapping.TypeTimeNS:
		return formatClock(at[int64](v.data, row), 9)
	case mapping.TypeTimeTZ:
		bits := at[uint64](v.data, row)
		const maxOffset = 16*60*60 - 1
		micros := int64(bits >> 24)
		offset := maxOffset - int(bits&0xFFFFFF)
		return formatClock(micros*1000, 6) + formatOffset(offset)
	case mapping.TypeTimestamp:
		return formatTimestamp(at[int64](v.data, row), time.Microsecond, "")
	case mapping.TypeTimestampTZ:
		return formatTimestamp(at[int64](v.data, row), time.Microsecond, "Z")
	case mapping.TypeTimestampS:
		return formatTimestamp(at[int64](v.data, row), time.Second, "")
	case mapping.TypeTimestampMS:
		return formatTimestamp(at[int64](v.data, row), time.Millisecond, "")
	case mapping.TypeTimestampNS:
		return formatTimestamp(at[int64](v.data, row), time.Nanosecond, "")
	case mapping.TypeInterval:
		type interval struct {
			months, days int32
			micros       int64
		}
		iv := at[interval](v.data, row)
		return sqlvalue.Interval(iv.months, iv.days, iv.micros)
	case mapping.TypeUUID:
		h := at[hugeint](v.data, row)
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], uint64(h.upper)^(1<<63))
		binary.BigEndian.PutUint64(b[8:], h.lower)
		return formatUUID(b)
	case mapping.TypeEnum:
		var i uint64
		switch v.d.internal {
		case mapping.TypeUTinyInt:
			i = uint64(at[uint8](v.data, row))
		case mapping.TypeUSmallInt:
			i = uint64(at[uint16](v.data, row))
		default:
			i = uint64(at[uint32](v.data, row))
		}
		if i < uint64(len(v.d.dict)) {
			return v.d.dict[i]
		}
		return nil
	case mapping.TypeList:
		type listEntry struct{ offset, length uint64 }
		e := at[listEntry](v.data, row)
		out := make([]any, e.length)
		for i := range e.length {
			out[i] = v.children[0].value(e.offset+i, l)
		}
		return out
	case mapping.TypeArray:
		n := v.d.arraySize
		out := make([]any, n)
		for i := range n {
			out[i] = v.children[0].value(row*n+i, l)
		}
		return out
	case mapping.TypeMap:
		type listEntry struct{ offset, length uint64 }
		e := at[listEntry](v.data, row)
		out := make(wire.Object, 0, e.length)
		for i := range e.length {
			k := v.children[0].value(e.offset+i, l)
			out = append(out, wire.Field{Key: wire.CellText(k), Value: v.children[1].value(e.offset+i, l)})
		}
		return out
	case mapping.TypeStruct:
		out := make(wire.Object, len(v.children))
		for i, c := range v.children {
			out[i] = wire.Field{Key: v.d.names[i], Value: c.value(row, l)}
		}
		return out
	case mapping.TypeUnion:
		tag := int(at[uint8](v.children[0].data, row))
		if tag+1 >= len(v.children) {
			return nil
		}
		return wire.Object{{Key: v.d.names[tag], Value: v.children[tag+1].value(row, l)}}
	}
	return nil
}

func bitString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	pad := int(b[0])
	var s strings.Builder
	for i, c := range b[1:] {
		for j := 7; j >= 0; j-- {
			if i == 0 && 7-j < pad {
				continue
			}
			if c&(1<<j) != 0 {
				s.WriteByte('1')
			} else {
				s.WriteByte('0')
			}
		}
	}
	return s.String()
}

// bigNum decodes DuckDB's BIGNUM (VARINT) encoding: a 3-byte header whose top bit
// says the sign, then the big-endian magnitude, bytes complemented when negative.
func bigNum(b []byte) *big.Int {
	if len(b) < 4 {
		return new(big.Int)
	}
	mag := b[3:]
	if b[0]&0x80 != 0 {
		return new(big.Int).SetBytes(mag)
	}
	c := make([]byte, len(mag))
	for i := range mag {
		c[i] = ^mag[i]
	}
	return new(big.Int).Neg(new(big.Int).SetBytes(c))
}

func formatUUID(b [16]byte) string {
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

func formatDate(days int32) string {
	switch days {
	case math.MaxInt32:
		return "infinity"
	case -math.MaxInt32:
		return "-infinity"
	}
	t := time.Unix(int64(days)*86400, 0).UTC()
	y, m, d := t.Date()
	return fmt.Sprintf("%s-%02d-%02d", sqlvalue.ISOYear(y), m, d)
}

// formatClock formats nanoseconds since midnight as hh:mm:ss[.fraction], with
// at most digits fractional digits and no trailing zeros.
func formatClock(nanos int64, digits int) string {
	h := nanos / int64(time.Hour)
	nanos -= h * int64(time.Hour)
	m := nanos / int64(time.Minute)
	nanos -= m * int64(time.Minute)
	s := nanos / int64(time.Second)
	nanos -= s * int64(time.Second)
	out := fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	return out + sqlvalue.Fraction(nanos, digits)
}

func formatOffset(seconds int) string {
	sign := byte('+')
	if seconds < 0 {
		sign = '-'
		seconds = -seconds
	}
	s := fmt.Sprintf("%c%02d:%02d", sign, seconds/3600, seconds/60%60)
	if seconds%60 != 0 {
		s += fmt.Sprintf(":%02d", seconds%60)
	}
	return s
}

func formatTimestamp(v int64, unit time.Duration, zone string) string {
	switch v {
	case math.MaxInt64:
		return "infinity"
	case -math.MaxInt64:
		return "-infinity"
	}
	var t time.Time
	digits := 6
	switch unit {
	case time.Second:
		t, digits = time.Unix(v, 0), 0
	case time.Millisecond:
		t, digits = time.UnixMilli(v), 3
	case time.Nanosecond:
		t, digits = time.Unix(0, v), 9
	default:
		t = time.UnixMicro(v)
	}
	t = t.UTC()
	y, m, d := t.Date()
	s := fmt.Sprintf("%s-%02d-%02dT%02d:%02d:%02d", sqlvalue.ISOYear(y), m, d, t.Hour(), t.Minute(), t.Second())
	if digits > 0 {
		s += sqlvalue.Fraction(int64(t.Nanosecond()), digits)
	}
	return s + zone
}
