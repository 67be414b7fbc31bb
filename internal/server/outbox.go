package server

import (
	"sync"
	"unicode/utf8"
)

// outbox is one connection's bounded outgoing buffer: the frames queued for
// its writer, already encoded, so that what waits for a slow client is held
// once, as the bytes to send. Pushing never blocks; a push that would take
// the bytes waiting (those queued and the one being written) beyond max
// empties the outbox and calls onOverflow instead: the client is cut. One
// frame alone is always taken, however large, when nothing else waits.
type outbox struct {
	max        int
	onOverflow func() // set before the first push that can overflow

	mu     sync.Mutex
	frames [][]byte
	bytes  int  // queued and in the writer's hands, not yet sent
	over   bool // overflowed: nothing more is queued
	closed bool
	// ready holds a token while frames wait for the writer.
	ready chan struct{}
}

func newOutbox(max int) *outbox {
	return &outbox{max: max, ready: make(chan struct{}, 1)}
}

// push queues b for the writer, or drops it once the outbox is closed or
// has overflowed.
func (o *outbox) push(b []byte) {
	o.mu.Lock()
	if o.closed || o.over {
		o.mu.Unlock()
		return
	}
	if o.bytes > 0 && o.bytes+len(b) > o.max {
		o.over = true
		clear(o.frames)
		o.frames = nil
		o.mu.Unlock()
		if o.onOverflow != nil {
			o.onOverflow()
		}
		return
	}
	o.frames = append(o.frames, b)
	o.bytes += len(b)
	o.mu.Unlock()
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// accepting reports whether a push would be queued (or overflow): false
// once the outbox is closed or has overflowed.
func (o *outbox) accepting() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.closed && !o.over
}

// take moves the frames queued into dst (reset first) for the writer, who
// calls sent for each once written.
func (o *outbox) take(dst [][]byte) [][]byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	dst = append(dst[:0], o.frames...)
	clear(o.frames)
	o.frames = o.frames[:0]
	return dst
}

// sent reports n bytes taken by the writer as written (or given up).
func (o *outbox) sent(n int) {
	o.mu.Lock()
	o.bytes -= n
	o.mu.Unlock()
}

// close drops what is queued and everything pushed later.
func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	clear(o.frames)
	o.frames = nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, exactly as encoding/json
// writes it (HTML characters, U+2028 and U+2029 escaped; invalid UTF-8 as
// U+FFFD), without its reflection: the token path encodes one per token.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
