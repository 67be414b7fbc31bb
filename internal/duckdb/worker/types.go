package worker

import (
	"fmt"
	"strings"

	"datachat"

	"github.com/duckdb/duckdb-go/v2/mapping"
)

// sqlType spells a logical type the way DuckDB's DESCRIBE does.
func sqlType(lt mapping.LogicalType) string {
	if alias := mapping.LogicalTypeGetAlias(lt); alias != "" {
		return alias // JSON and user aliases
	}
	switch id := mapping.GetTypeId(lt); id {
	case mapping.TypeBoolean:
		return "BOOLEAN"
	case mapping.TypeTinyInt:
		return "TINYINT"
	case mapping.TypeSmallInt:
		return "SMALLINT"
	case mapping.TypeInteger:
		return "INTEGER"
	case mapping.TypeBigInt:
		return "BIGINT"
	case mapping.TypeUTinyInt:
		return "UTINYINT"
	case mapping.TypeUSmallInt:
		return "USMALLINT"
	case mapping.TypeUInteger:
		return "UINTEGER"
	case mapping.TypeUBigInt:
		return "UBIGINT"
	case mapping.TypeHugeInt:
		return "HUGEINT"
	case mapping.TypeUHugeInt:
		return "UHUGEINT"
	case mapping.TypeFloat:
		return "FLOAT"
	case mapping.TypeDouble:
		return "DOUBLE"
	case mapping.TypeDecimal:
		return fmt.Sprintf("DECIMAL(%d,%d)", mapping.DecimalWidth(lt), mapping.DecimalScale(lt))
	case mapping.TypeVarchar:
		return "VARCHAR"
	case mapping.TypeBlob:
		return "BLOB"
	case mapping.TypeDate:
		return "DATE"
	case mapping.TypeTime:
		return "TIME"
	case mapping.TypeTimeNS:
		return "TIME_NS"
	case mapping.TypeTimeTZ:
		return "TIME WITH TIME ZONE"
	case mapping.TypeTimestamp:
		return "TIMESTAMP"
	case mapping.TypeTimestampS:
		return "TIMESTAMP_S"
	case mapping.TypeTimestampMS:
		return "TIMESTAMP_MS"
	case mapping.TypeTimestampNS:
		return "TIMESTAMP_NS"
	case mapping.TypeTimestampTZ:
		return "TIMESTAMP WITH TIME ZONE"
	case mapping.TypeInterval:
		return "INTERVAL"
	case mapping.TypeUUID:
		return "UUID"
	case mapping.TypeBit:
		return "BIT"
	case mapping.TypeBigNum:
		return "BIGNUM"
	case mapping.TypeSQLNull:
		return `"NULL"`
	case mapping.TypeEnum:
		n := int(mapping.EnumDictionarySize(lt))
		var b strings.Builder
		b.WriteString("ENUM(")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			if i == 8 && n > 10 {
				fmt.Fprintf(&b, "… %d more", n-i)
				break
			}
			b.WriteString(datachat.QuoteLiteral(mapping.EnumDictionaryValue(lt, mapping.IdxT(i))))
		}
		b.WriteString(")")
		return b.String()
	case mapping.TypeList:
		child := mapping.ListTypeChildType(lt)
		defer mapping.DestroyLogicalType(&child)
		return sqlType(child) + "[]"
	case mapping.TypeArray:
		child := mapping.ArrayTypeChildType(lt)
		defer mapping.DestroyLogicalType(&child)
		return fmt.Sprintf("%s[%d]", sqlType(child), mapping.ArrayTypeArraySize(lt))
	case mapping.TypeMap:
		k := mapping.MapTypeKeyType(lt)
		defer mapping.DestroyLogicalType(&k)
		v := mapping.MapTypeValueType(lt)
		defer mapping.DestroyLogicalType(&v)
		return fmt.Sprintf("MAP(%s, %s)", sqlType(k), sqlType(v))
	case mapping.TypeStruct:
		return fieldList("STRUCT", int(mapping.StructTypeChildCount(lt)), func(i mapping.IdxT) (string, mapping.LogicalType) {
			return mapping.StructTypeChildName(lt, i), mapping.StructTypeChildType(lt, i)
		})
	case mapping.TypeUnion:
		return fieldList("UNION", int(mapping.UnionTypeMemberCount(lt)), func(i mapping.IdxT) (string, mapping.LogicalType) {
			return mapping.UnionTypeMemberName(lt, i), mapping.UnionTypeMemberType(lt, i)
		})
	case mapping.TypeGeometry:
		return "GEOMETRY"
	case mapping.TypeVariant:
		return "VARIANT"
	default:
		return fmt.Sprintf("TYPE_%d", id)
	}
}

// fieldList writes a STRUCT's or UNION's type, kind(name type, ...), from its
// n named fields; field returns the i-th one's name and type, which
// fieldList destroys.
func fieldList(kind string, n int, field func(i mapping.IdxT) (string, mapping.LogicalType)) string {
	var b strings.Builder
	b.WriteString(kind + "(")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		name, child := field(mapping.IdxT(i))
		b.WriteString(quoteFieldName(name))
		b.WriteString(" ")
		b.WriteString(sqlType(child))
		mapping.DestroyLogicalType(&child)
	}
	b.WriteString(")")
	return b.String()
}

// quoteFieldName quotes a STRUCT field name when DuckDB would.
func quoteFieldName(s string) string {
	plain := s != ""
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return datachat.QuoteIdent(s)
}
