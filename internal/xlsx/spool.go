package xlsx

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// spoolWriter writes a sheet's rows: per row its index and cell count, per
// cell its column, kind and format, and value.
type spoolWriter struct {
	w   *bufio.Writer
	buf []byte
}

func (sw *spoolWriter) writeRow(idx int32, cells []cell) error {
	b := sw.buf[:0]
	b = binary.AppendUvarint(b, uint64(idx))
	b = binary.AppendUvarint(b, uint64(len(cells)))
	for _, c := range cells {
		b = binary.AppendUvarint(b, uint64(c.col))
		b = append(b, byte(c.kind)<<4|byte(c.fmt))
		switch c.kind {
		case kNum, kBool, kStamp:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.num))
		case kText, kErr:
			b = binary.AppendUvarint(b, uint64(len(c.text)))
			b = append(b, c.text...)
		}
	}
	sw.buf = b
	_, err := sw.w.Write(b)
	return err
}

// spoolReader reads a spool back, row by row.
type spoolReader struct {
	r     *bufio.Reader
	cells []cell
}

var errSpool = errors.New("xlsx: spool damaged")

// next returns the next row, or io.EOF. The cells are valid until the next
// call.
func (sr *spoolReader) next() (int32, []cell, error) {
	idx, err := binary.ReadUvarint(sr.r)
	if err != nil {
		return 0, nil, err // io.EOF at the end
	}
	n, err := binary.ReadUvarint(sr.r)
	if err != nil || n > excelCols {
		return 0, nil, errSpool
	}
	sr.cells = sr.cells[:0]
	var b8 [8]byte
	for range n {
		var c cell
		col, err := binary.ReadUvarint(sr.r)
		if err != nil {
			return 0, nil, errSpool
		}
		kf, err := sr.r.ReadByte()
		if err != nil {
			return 0, nil, errSpool
		}
		c.col, c.kind, c.fmt = int32(col), cellKind(kf>>4), fmtClass(kf&0x0f)
		switch c.kind {
		case kNum, kBool, kStamp:
			if _, err := io.ReadFull(sr.r, b8[:]); err != nil {
				return 0, nil, errSpool
			}
			c.num = math.Float64frombits(binary.LittleEndian.Uint64(b8[:]))
		case kText, kErr:
			l, err := binary.ReadUvarint(sr.r)
			if err != nil || l > maxRowBytes {
				return 0, nil, errSpool
			}
			buf := make([]byte, l)
			if _, err := io.ReadFull(sr.r, buf); err != nil {
				return 0, nil, errSpool
			}
			c.text = string(buf)
		}
		sr.cells = append(sr.cells, c)
	}
	return int32(idx), sr.cells, nil
}

// eachSpooled calls fn with every spooled row of a sheet.
func eachSpooled(path string, fn func(idx int32, cells []cell) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("xlsx: spool: %w", err)
	}
	defer f.Close()
	sr := &spoolReader{r: bufio.NewReaderSize(f, 256<<10)}
	for {
		idx, cells, err := sr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(idx, cells); err != nil {
			return err
		}
	}
}
