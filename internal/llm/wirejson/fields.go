package wirejson

import "encoding/json"

// Field is a struct field as [Reader.Object] reads it: its JSON name and how
// its value is read into it, as encoding/json would store it.
type Field struct {
	name string
	read func(*Reader)
}

// String is a string field; null leaves it as it is.
func String(name string, p *string) Field {
	return Field{name, func(r *Reader) { r.ReadString(p) }}
}

// StringPtr is a *string field; null sets it to nil.
func StringPtr(name string, p **string) Field {
	return Field{name, func(r *Reader) { r.ReadStringPtr(p) }}
}

// Int is an int field; null leaves it as it is.
func Int(name string, p *int) Field {
	return Field{name, func(r *Reader) { r.ReadInt(p) }}
}

// IntPtr is an *int field; null sets it to nil.
func IntPtr(name string, p **int) Field {
	return Field{name, func(r *Reader) { r.ReadIntPtr(p) }}
}

// Int64 is an int64 field; null leaves it as it is.
func Int64(name string, p *int64) Field {
	return Field{name, func(r *Reader) { r.ReadInt64(p) }}
}

// Bool is a bool field; null leaves it as it is.
func Bool(name string, p *bool) Field {
	return Field{name, func(r *Reader) { r.ReadBool(p) }}
}

// Raw is a json.RawMessage field; null too is kept, as "null".
func Raw(name string, p *json.RawMessage) Field {
	return Field{name, func(r *Reader) { r.ReadRaw(p) }}
}

// Struct is a field of a struct type that read reads; null leaves it as it
// is.
func Struct[T any](name string, p *T, read func(*Reader, *T)) Field {
	return Field{name, func(r *Reader) { read(r, p) }}
}

// Ptr is a field of a pointer type, its value read with read ([ReadPtr]).
func Ptr[T any](name string, p **T, read func(*Reader, *T)) Field {
	return Field{name, func(r *Reader) { ReadPtr(r, p, read) }}
}

// Slice is a field of a slice type, its elements read with read
// ([ReadSlice]).
func Slice[T any](name string, p *[]T, read func(*Reader, *T)) Field {
	return Field{name, func(r *Reader) { ReadSlice(r, p, read) }}
}

// Unsupported is a field of a pointer type left to encoding/json: a null
// leaves it nil, any other value makes the reader give up.
func Unsupported(name string) Field {
	return Field{name, func(r *Reader) {
		if !r.Null() {
			r.GiveUp()
		}
	}}
}
