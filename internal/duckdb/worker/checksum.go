package worker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
)

// verifyPageChecksums checks the CRC-32 of every Parquet page that carries one.
// DuckDB does not verify page checksums, so a file whose bytes were altered
// would otherwise load and answer wrong sums in silence
// (datapage_v1-corrupt-checksum.parquet). Only a mismatch is an error: a
// footer or page header this reader cannot follow leaves the judgement to
// DuckDB. A column chunk whose first page has no checksum is skipped whole
// (writers checksum all pages or none), so files without checksums cost only
// a footer read.
func verifyPageChecksums(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size < 12 {
		return nil
	}
	var tail [8]byte
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return nil
	}
	footerLen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if string(tail[4:]) != "PAR1" || footerLen <= 0 || footerLen > size-12 || footerLen > 256<<20 {
		return nil
	}
	footer := make([]byte, footerLen)
	if _, err := f.ReadAt(footer, size-8-footerLen); err != nil {
		return nil
	}
	chunks, err := parseFooter(footer)
	if err != nil {
		return nil
	}
	for _, c := range chunks {
		if err := verifyChunk(f, size, c); err != nil {
			return err
		}
	}
	return nil
}

type columnChunk struct {
	path          string
	rowGroup      int
	start, length int64
}

// verifyChunk walks the pages of one column chunk.
func verifyChunk(f *os.File, size int64, c columnChunk) error {
	pos, end := c.start, min(c.start+c.length, size)
	buf := make([]byte, 64<<10)
	for page := 0; pos < end; page++ {
		n, err := f.ReadAt(buf, pos)
		if n == 0 || err != nil && !errors.Is(err, io.EOF) {
			return nil
		}
		h, hlen, err := parsePageHeader(buf[:n])
		if err != nil || h.compressedSize < 0 || pos+int64(hlen)+int64(h.compressedSize) > size {
			return nil
		}
		if !h.hasCRC {
			if page == 0 {
				return nil
			}
		} else {
			data := make([]byte, h.compressedSize)
			if _, err := f.ReadAt(data, pos+int64(hlen)); err != nil {
				return nil
			}
			if got := crc32.ChecksumIEEE(data); got != h.crc {
				return fmt.Errorf("page %d of column %s in row group %d fails its checksum (CRC %08x, stored %08x): the file's bytes were altered or damaged", page, c.path, c.rowGroup, got, h.crc)
			}
		}
		pos += int64(hlen) + int64(h.compressedSize)
	}
	return nil
}

// A minimal reader of Thrift's compact protocol, enough for the footer's
// column chunk locations and the page headers' sizes and checksums.
type thrift struct {
	b   []byte
	pos int
}

var errThrift = errors.New("malformed thrift")

const (
	tStop    = 0
	tTrue    = 1
	tFalse   = 2
	tByte    = 3
	tI16     = 4
	tI32     = 5
	tI64     = 6
	tDouble  = 7
	tBinary  = 8
	tList    = 9
	tSet     = 10
	tMap     = 11
	tStruct  = 12
	maxDepth = 32
)

func (t *thrift) byte() (byte, error) {
	if t.pos >= len(t.b) {
		return 0, errThrift
	}
	c := t.b[t.pos]
	t.pos++
	return c, nil
}

func (t *thrift) uvarint() (uint64, error) {
	v, n := binary.Uvarint(t.b[t.pos:])
	if n <= 0 {
		return 0, errThrift
	}
	t.pos += n
	return v, nil
}

func (t *thrift) varint() (int64, error) {
	u, err := t.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

func (t *thrift) binary() ([]byte, error) {
	n, err := t.uvarint()
	if err != nil || n > uint64(len(t.b)-t.pos) {
		return nil, errThrift
	}
	b := t.b[t.pos : t.pos+int(n)]
	t.pos += int(n)
	return b, nil
}

// listHeader returns a list's element type and size.
func (t *thrift) listHeader() (byte, int, error) {
	h, err := t.byte()
	if err != nil {
		return 0, 0, err
	}
	n := int(h >> 4)
	if n == 15 {
		u, err := t.uvarint()
		if err != nil || u > uint64(len(t.b)) {
			return 0, 0, errThrift
		}
		n = int(u)
	}
	return h & 0x0f, n, nil
}

// fields calls fn for each field of a struct; fn must consume the value (or
// call skip) and report whether it did.
func (t *thrift) fields(fn func(id int16, typ byte) (bool, error)) error {
	var last int16
	for {
		h, err := t.byte()
		if err != nil {
			return err
		}
		typ := h & 0x0f
		if typ == tStop {
			return nil
		}
		id := last + int16(h>>4)
		if h>>4 == 0 {
			v, err := t.varint()
			if err != nil {
				return err
			}
			id = int16(v)
		}
		last = id
		done, err := fn(id, typ)
		if err != nil {
			return err
		}
		if !done {
			if err := t.skip(typ, 0); err != nil {
				return err
			}
		}
	}
}

func (t *thrift) skip(typ byte, depth int) error {
	if depth > maxDepth {
		return errThrift
	}
	switch typ {
	case tTrue, tFalse:
		return nil
	case tByte:
		_, err := t.byte()
		return err
	case tI16, tI32, tI64:
		_, err := t.uvarint()
		return err
	case tDouble:
		if t.pos+8 > len(t.b) {
			return errThrift
		}
		t.pos += 8
		return nil
	case tBinary:
		_, err := t.binary()
		return err
	case tList, tSet:
		et, n, err := t.listHeader()
		if err != nil {
			return err
		}
		for range n {
			if et == tTrue || et == tFalse {
				if _, err := t.byte(); err != nil {
					return err
				}
				continue
			}
			if err := t.skip(et, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tMap:
		n, err := t.uvarint()
		if err != nil || n > uint64(len(t.b)) {
			return errThrift
		}
		if n == 0 {
			return nil
		}
		kv, err := t.byte()
		if err != nil {
			return err
		}
		for range n {
			if err := t.skip(kv>>4, depth+1); err != nil {
				return err
			}
			if err := t.skip(kv&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tStruct:
		return t.fields(func(_ int16, ft byte) (bool, error) {
			return true, t.skip(ft, depth+1)
		})
	}
	return errThrift
}

// parseFooter lists the byte ranges of the footer's column chunks.
func parseFooter(b []byte) ([]columnChunk, error) {
	t := &thrift{b: b}
	var chunks []columnChunk
	err := t.listField(4, func(rg int) error { // FileMetaData.row_groups
		return t.listField(1, func(int) error { // RowGroup.columns
			c, err := parseColumnChunk(t)
			if err != nil {
				return err
			}
			if c.length > 0 {
				c.rowGroup = rg
				chunks = append(chunks, c)
			}
			return nil
		})
	})
	return chunks, err
}

// listField reads the struct t is at, calling each for every element (by
// its index) of its field id where that is a list; each must consume the
// element. Other fields are skipped.
func (t *thrift) listField(id int16, each func(i int) error) error {
	return t.fields(func(fid int16, typ byte) (bool, error) {
		if fid != id || typ != tList {
			return false, nil
		}
		_, n, err := t.listHeader()
		if err != nil {
			return false, err
		}
		for i := range n {
			if err := each(i); err != nil {
				return false, err
			}
		}
		return true, nil
	})
}

func parseColumnChunk(t *thrift) (columnChunk, error) {
	var c columnChunk
	external := false
	var dataOff, dictOff, total int64
	err := t.fields(func(id int16, typ byte) (bool, error) {
		switch {
		case id == 1 && typ == tBinary: // file_path: data in another file
			external = true
			return false, nil
		case id == 3 && typ == tStruct: // meta_data
			return true, t.fields(func(id int16, typ byte) (bool, error) {
				var err error
				switch {
				case id == 3 && typ == tList: // path_in_schema
					_, n, err := t.listHeader()
					if err != nil {
						return false, err
					}
					parts := make([]string, 0, n)
					for range n {
						p, err := t.binary()
						if err != nil {
							return false, err
						}
						parts = append(parts, string(p))
					}
					c.path = strings.Join(parts, ".")
					return true, nil
				case id == 7 && typ == tI64:
					total, err = t.varint()
				case id == 9 && typ == tI64:
					dataOff, err = t.varint()
				case id == 11 && typ == tI64:
					dictOff, err = t.varint()
				default:
					return false, nil
				}
				return true, err
			})
		}
		return false, nil
	})
	if err != nil || external {
		return columnChunk{}, err
	}
	c.start = dataOff
	if dictOff > 0 && dictOff < dataOff {
		c.start = dictOff
	}
	c.length = total
	if c.start < 4 || c.length <= 0 {
		c.length = 0
	}
	return c, nil
}

type pageHeader struct {
	compressedSize int32
	hasCRC         bool
	crc            uint32
}

func parsePageHeader(b []byte) (pageHeader, int, error) {
	t := &thrift{b: b}
	var h pageHeader
	h.compressedSize = -1
	err := t.fields(func(id int16, typ byte) (bool, error) {
		switch {
		case id == 3 && typ == tI32:
			v, err := t.varint()
			h.compressedSize = int32(v)
			return true, err
		case id == 4 && typ == tI32:
			v, err := t.varint()
			h.hasCRC, h.crc = true, uint32(int32(v))
			return true, err
		}
		return false, nil
	})
	return h, t.pos, err
}
