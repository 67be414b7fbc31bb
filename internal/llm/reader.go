package llm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// MaxLineBytes bounds one line of a stream (an SSE field or an NDJSON object).
const MaxLineBytes = 16 << 20

// ErrLineTooLong is returned by the readers for a line longer than MaxLineBytes.
var ErrLineTooLong = errors.New("stream line too long")

// LineReader reads lines ended by "\n", "\r\n" or a lone "\r", without the end.
type LineReader struct {
	r       *bufio.Reader
	pending [][]byte // lines split off a chunk at lone "\r"s
	buf     []byte
}

// NewLineReader returns a LineReader reading r. Its buffer is small: a
// streamed answer's lines are mostly short, a longer one is gathered in
// pieces, and a server relays hundreds of answers at once.
func NewLineReader(r io.Reader) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 4<<10)}
}

// Line returns the next line. The slice is valid until the next call. At the
// end of input it returns io.EOF; a last line without an end is returned first.
func (l *LineReader) Line() ([]byte, error) {
	if len(l.pending) > 0 {
		line := l.pending[0]
		l.pending = l.pending[1:]
		return line, nil
	}
	l.buf = l.buf[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		if len(l.buf)+len(chunk) > MaxLineBytes {
			return nil, ErrLineTooLong
		}
		l.buf = append(l.buf, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && (err != io.EOF || len(l.buf) == 0) {
			return nil, err
		}
		break
	}
	line := bytes.TrimSuffix(l.buf, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if bytes.IndexByte(line, '\r') >= 0 {
		parts := bytes.Split(line, []byte("\r"))
		l.pending = parts[1:]
		return parts[0], nil
	}
	return line, nil
}

// NDJSONReader reads newline-delimited JSON: one value a line, blank lines
// skipped.
type NDJSONReader struct{ lines *LineReader }

// NewNDJSONReader returns an NDJSONReader reading r.
func NewNDJSONReader(r io.Reader) *NDJSONReader {
	return &NDJSONReader{lines: NewLineReader(r)}
}

// Next returns the next non-blank line, valid until the next call, or io.EOF.
func (n *NDJSONReader) Next() ([]byte, error) {
	for {
		line, err := n.lines.Line()
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
	}
}

// Event is one server-sent event.
type Event struct {
	Name string // the "event:" field, "" for the default
	// Data is the "data:" fields joined by "\n". [SSEReader.Next] reuses
	// its memory: it is valid until the next call.
	Data []byte
}

// SSEReader reads server-sent events (the text/event-stream format): "data:"
// lines joined until a blank line, comments (":") ignored.
type SSEReader struct {
	lines *LineReader
	eof   bool
	data  []byte // the last event's data, reused by the next
}

// keptDataBytes is the most of an event's data buffer an SSEReader keeps
// for the next event: one long event does not hold its size for the rest
// of the answer.
const keptDataBytes = 64 << 10

// NewSSEReader returns an SSEReader reading r.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{lines: NewLineReader(r)}
}

// Next returns the next event with data, or io.EOF. An event cut off by the end
// of input is still returned, as the official SDKs do. The event's Data is
// valid until the next call.
func (s *SSEReader) Next() (Event, error) {
	var ev Event
	if cap(s.data) > keptDataBytes {
		s.data = nil
	}
	data := s.data[:0]
	defer func() { s.data = data }()
	hasData := false
	for !s.eof {
		line, err := s.lines.Line()
		if err == io.EOF {
			s.eof = true
			break
		}
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if hasData {
				ev.Data = data
				return ev, nil
			}
			ev = Event{}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		case "event":
			ev.Name = string(value)
		}
	}
	if hasData {
		ev.Data = data
		return ev, nil
	}
	return Event{}, io.EOF
}

// NextData returns the data of the next event, valid until the next call,
// or io.EOF: the frames [DecodeFrames] reads from an SSE answer.
func (s *SSEReader) NextData() ([]byte, error) {
	ev, err := s.Next()
	return ev.Data, err
}
