package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"datachat"
	"datachat/internal/chat"
)

// wsReadLimit caps one client message; chat_send content is capped far lower.
const wsReadLimit = 256 << 10

// The WebSocket protocol's message types, client to server.
const (
	wsChatSend      = "chat_send"
	wsConfirmAction = "confirm_action"
	wsChatCancel    = "chat_cancel"
)

// wsEventNames are the WebSocket protocol's names for a turn's events, server
// to client.
var wsEventNames = map[chat.EventType]string{
	chat.EventToken:          "chat_token",
	chat.EventToolCallStart:  "tool_call_start",
	chat.EventToolCallResult: "tool_call_result",
	chat.EventConfirmation:   "confirmation_required",
	chat.EventComplete:       "chat_complete",
	chat.EventError:          "chat_error",
}

// wsEvent is one message to the client: {"type", "data"}.
type wsEvent struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// clientMessage is one message from the page: {"type", "data"}, decoded by
// decodeClientMessage.
type clientMessage struct {
	Type string
	// chat_send
	Content string
	// confirm_action
	ID       string
	Approved bool
	Note     string
}

// decodeClientMessage decodes one message from the client, data included. The
// error is a datachat.Error (EINVALID) saying what a message must look like,
// for the chat_error answering it.
func decodeClientMessage(b []byte) (clientMessage, error) {
	var env struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil || env.Type == "" {
		return clientMessage{}, datachat.Errorf(datachat.EINVALID, "Messages must be JSON objects {\"type\", \"data\"}.")
	}
	msg := clientMessage{Type: env.Type}
	switch env.Type {
	case wsChatSend:
		var d struct {
			Content string `json:"content"`
		}
		if err := json.Unmarshal(env.Data, &d); err != nil {
			return msg, datachat.Errorf(datachat.EINVALID, "chat_send needs {\"content\": \"…\"}.")
		}
		msg.Content = d.Content
	case wsConfirmAction:
		var d struct {
			ID       string `json:"id"`
			Approved *bool  `json:"approved"`
			Note     string `json:"note"`
		}
		if err := json.Unmarshal(env.Data, &d); err != nil || d.ID == "" || d.Approved == nil {
			return msg, datachat.Errorf(datachat.EINVALID, "confirm_action needs {\"id\", \"approved\": true|false, \"note\"?}.")
		}
		msg.ID, msg.Approved, msg.Note = d.ID, *d.Approved, d.Note
	case wsChatCancel:
	default:
		return msg, datachat.Errorf(datachat.EINVALID, "Unknown message type %q: want chat_send, chat_cancel or confirm_action.", env.Type)
	}
	return msg, nil
}

// WebSocket keep-alive defaults: a ping every 20 s, answered within 10 s.
const (
	defaultPingInterval = 20 * time.Second
	defaultPingTimeout  = 10 * time.Second
	// defaultWriteTimeout bounds one event's write to a client that reads
	// too slowly (Config.WSWriteTimeout).
	defaultWriteTimeout = 10 * time.Second
	// defaultOutboxBytes bounds the events queued for one WebSocket
	// (Config.WSOutboxBytes).
	defaultOutboxBytes = 1 << 20
)

// wsStatusRevoked is the close code of a WebSocket whose credential was
// revoked (the API key, the session, or its user disabled), as HTTP's 401;
// the close reason says why, for the page to show. The client should not
// reconnect with the same credential.
const wsStatusRevoked websocket.StatusCode = 4401

// serveWS runs the chat protocol of one conversation over a WebSocket. Auth,
// the conversation and the user's cap on open sockets are checked before the
// upgrade, so a failure is a plain HTTP 401, 404 or 429.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	user := UserFrom(r.Context())
	conv, err := s.Store.Conversation(r.Context(), user.ID, r.URL.Query().Get("conversation_id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	release, err := s.admitWS(user.ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	defer release()
	// Counted before the upgrade: once hijacked, http.Server.Shutdown no
	// longer sees the connection, and Shutdown waits on wsWG instead.
	s.wsWG.Add(1)
	defer s.wsWG.Done()
	opts := &websocket.AcceptOptions{Subprotocols: []string{wsSubprotocol}}
	if u, err := url.Parse(s.cfg.PublicURL); err == nil && u.Host != "" {
		// The page at DATACHAT_PUBLIC_URL is the server's own, whatever
		// Host a proxy in front passes on.
		opts.OriginPatterns = []string{u.Scheme + "://" + u.Host}
	}
	c, err := websocket.Accept(w, r, opts)
	if err != nil {
		return // Accept has answered the client
	}
	c.SetReadLimit(wsReadLimit)
	s.wsSessions.Add(1)
	defer s.wsSessions.Add(-1)

	sess := &wsSession{s: s, conn: c, user: user, conv: conv, log: s.logger(r), grant: grantFrom(r.Context())}
	sess.out = newOutbox(cmp.Or(s.cfg.WSOutboxBytes, defaultOutboxBytes))
	sess.run(context.WithoutCancel(r.Context()))
}

// admitWS counts a chat WebSocket of the user, refusing one beyond
// MaxWSPerUser; release uncounts it.
func (s *Server) admitWS(userID string) (release func(), err error) {
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	if s.cfg.MaxWSPerUser > 0 && s.wsUsers[userID] >= s.cfg.MaxWSPerUser {
		return nil, &datachat.Error{
			Code:       datachat.ERATELIMIT,
			Message:    fmt.Sprintf("Too many open chat connections: you have %d, the most allowed per user. Close datachat in other tabs or windows, then try again.", s.wsUsers[userID]),
			RetryAfter: 10 * time.Second,
		}
	}
	if s.wsUsers == nil {
		s.wsUsers = map[string]int{}
	}
	s.wsUsers[userID]++
	return func() {
		s.wsMu.Lock()
		defer s.wsMu.Unlock()
		if s.wsUsers[userID]--; s.wsUsers[userID] <= 0 {
			delete(s.wsUsers, userID)
		}
	}, nil
}

type wsSession struct {
	s    *Server
	conn *websocket.Conn
	user *datachat.User
	conv *datachat.Conversation
	out  *outbox // the events for the writer, encoded
	log  *slog.Logger
	// grant is the session's hold on its credential: revoked, the
	// connection closes (wsStatusRevoked) and its turn is cancelled.
	grant *grant

	mu         sync.Mutex
	turnCancel func() // set while a turn runs
	turns      sync.WaitGroup
}

// run serves the session until its connection closes: the client closed it,
// stopped answering pings, could not be written to or fell too far behind,
// its credential was revoked, or the server shut down.
// Two goroutines share the connection: the reader (client messages, pongs)
// and the writer, which writes every event and alone closes the connection,
// so nothing queued before a close is lost to it; a timer pings. A turn never
// waits for the client: its events go to the session's bounded outbox.
func (ss *wsSession) run(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	if p, err := ss.s.Store.PendingConfirmation(ctx, ss.conv.ID); err == nil {
		ss.sendConfirmation(p) // queued first; the writer starts below
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		ss.readLoop(ctx)
	}()
	// live ends when the client fails a ping or falls more than the
	// outbox behind: that also stops a write blocked on a client that
	// stopped reading.
	live, gone := context.WithCancelCause(ctx)
	defer gone(nil)
	ss.out.onOverflow = func() {
		gone(fmt.Errorf("%w: more than %d bytes of events waited for it", errTooSlow, ss.out.max))
	}
	stopPings := ss.ping(live, gone)
	defer stopPings()

	cut := ss.writeLoop(live, readDone)
	ss.out.close() // events from now on are dropped, none held
	if !cut {
		// The client closed the connection: a streaming turn is cancelled
		// (not one awaiting confirmation: that holds no stream and waits
		// for the next connection); the turn keeps the text streamed so far.
		ss.cancelTurn()
	}
	// A client the server cut (it stopped reading, or answering pings)
	// does not cancel its turn: the answer is completed and stored, and
	// the client finds it in the conversation when it comes back.
	cancel() // ends the reader, and a ping waiting for its answer
	<-readDone
	ss.turns.Wait()
}

// errTooSlow is why a client that does not keep up with its events is cut.
var errTooSlow = errors.New("the client reads too slowly")

// readLoop handles the client's messages until the connection fails or closes.
func (ss *wsSession) readLoop(ctx context.Context) {
	for {
		_, data, err := ss.conn.Read(ctx)
		if err != nil {
			return
		}
		msg, err := decodeClientMessage(data)
		if err != nil {
			ss.sendError(err)
			continue
		}
		ss.handle(ctx, msg)
	}
}

// ping pings the client every ping interval and ends live, with the reason,
// on a ping not answered within the ping timeout: a client that stopped
// reading (or vanished without closing) is found even while a turn's events
// still fit in the kernel's buffers. The pings run from a timer, not a
// goroutine of the session's: a goroutine (and its stack) only while a ping
// waits for its answer, not one per connection for its whole life (300 of a
// server's 1,600 goroutines with 300 clients connected). stop stops them.
func (ss *wsSession) ping(live context.Context, gone context.CancelCauseFunc) (stop func()) {
	interval, timeout := ss.s.cfg.WSPingInterval, ss.s.cfg.WSPingTimeout
	if interval <= 0 {
		interval = defaultPingInterval
	}
	if timeout <= 0 {
		timeout = defaultPingTimeout
	}
	var t atomic.Pointer[time.Timer]
	t.Store(time.AfterFunc(interval, func() {
		if live.Err() != nil {
			return
		}
		pctx, cancel := context.WithTimeout(live, timeout)
		err := ss.conn.Ping(pctx)
		cancel()
		if err != nil {
			gone(fmt.Errorf("no answer to a ping within %s: %w", timeout, err))
			return
		}
		if live.Err() == nil {
			t.Load().Reset(interval)
		}
	}))
	return func() { t.Load().Stop() }
}

// writeLoop writes the session's events in order and owns the connection's
// end: it closes the connection when the reader is done (the client closed or
// broke it), when a ping went unanswered or the outbox overflowed (live
// ended) or a write failed or timed out (the client is gone or stopped
// reading), when the credential is revoked (with wsStatusRevoked and why,
// nothing queued written: the turn is cancelled already), or, on shutdown,
// after writing every event queued — Shutdown closes s.closing only once no
// turn runs, and a turn queues its last event (chat_complete, or the
// chat_error of an interrupted turn) before it counts as ended. cut reports
// a client the server cut for not keeping up (not one that closed).
func (ss *wsSession) writeLoop(live context.Context, readDone <-chan struct{}) (cut bool) {
	var batch [][]byte
	// flush writes the events queued; false when the connection is done.
	flush := func() bool {
		batch = ss.out.take(batch)
		for i, b := range batch {
			batch[i] = nil
			if ss.grant.err() != nil {
				ss.closeRevoked()
				return false
			}
			err := ss.write(live, b)
			ss.out.sent(len(b))
			if err != nil {
				ss.drop(live, err)
				return false
			}
		}
		return true
	}
	for {
		select {
		case <-ss.grant.ctx.Done():
			ss.closeRevoked()
			return false
		case <-ss.out.ready:
			if !flush() {
				return ss.grant.err() == nil
			}
		case <-readDone:
			ss.conn.CloseNow()
			return false
		case <-live.Done():
			ss.drop(live, nil)
			return true
		case <-ss.s.closing:
			if flush() {
				ss.conn.Close(websocket.StatusGoingAway, "the server is restarting")
			}
			return false
		}
	}
}

// closeRevoked closes the connection of a revoked credential with
// wsStatusRevoked and why.
func (ss *wsSession) closeRevoked() {
	msg := datachat.ErrorMessage(ss.grant.err())
	ss.log.Info("websocket credential revoked: closing", slog.String("conversation_id", ss.conv.ID), slog.String("reason", msg))
	ss.conn.Close(wsStatusRevoked, closeReason(msg))
}

// drop closes the connection of a client that is gone or stopped reading.
func (ss *wsSession) drop(live context.Context, err error) {
	cause := context.Cause(live)
	switch {
	case errors.Is(cause, errTooSlow) || errors.Is(err, context.DeadlineExceeded):
		// The outbox overflowed, or a write outlasted the write timeout.
		why := cause
		if !errors.Is(cause, errTooSlow) {
			why = fmt.Errorf("%w: a write took more than %s", errTooSlow, ss.writeTimeout())
		}
		ss.log.Info("websocket client too slow: closing", slog.String("conversation_id", ss.conv.ID), slog.String("error", why.Error()))
	case cause != nil && !errors.Is(cause, context.Canceled):
		// An unanswered ping (which also ended a blocked write).
		ss.log.Info("websocket client gone: closing", slog.String("conversation_id", ss.conv.ID), slog.String("error", cause.Error()))
	case err != nil:
		ss.log.Debug("websocket write failed: closing", slog.String("conversation_id", ss.conv.ID), slog.String("error", err.Error()))
	}
	ss.conn.CloseNow()
}

func (ss *wsSession) writeTimeout() time.Duration {
	return cmp.Or(ss.s.cfg.WSWriteTimeout, defaultWriteTimeout)
}

// write writes one encoded event, waiting at most the write timeout for the
// client.
func (ss *wsSession) write(live context.Context, b []byte) error {
	wctx, cancel := context.WithTimeout(live, ss.writeTimeout())
	defer cancel()
	return ss.conn.Write(wctx, websocket.MessageText, b)
}

func (ss *wsSession) handle(ctx context.Context, msg clientMessage) {
	switch msg.Type {
	case wsChatSend:
		ss.startTurn(ctx, func(tctx context.Context, sink chat.Sink) (*chat.Outcome, error) {
			return ss.s.Chat.Send(tctx, ss.user, ss.conv.ID, msg.Content, chat.TurnOptions{}, sink)
		})
	case wsConfirmAction:
		ss.startTurn(ctx, func(tctx context.Context, sink chat.Sink) (*chat.Outcome, error) {
			return ss.s.Chat.Confirm(tctx, ss.user, ss.conv.ID, msg.ID, msg.Approved, msg.Note, sink)
		})
	case wsChatCancel:
		if ss.cancelTurn() {
			return
		}
		// No stream running: stop a turn that waits for confirmation, if any.
		if _, err := ss.s.Store.PendingConfirmation(ctx, ss.conv.ID); err == nil {
			ss.startTurn(ctx, func(tctx context.Context, sink chat.Sink) (*chat.Outcome, error) {
				return ss.s.Chat.CancelPending(tctx, ss.user, ss.conv.ID, sink)
			})
		}
	}
}

// startTurn runs a turn in its own goroutine, one at a time per connection.
func (ss *wsSession) startTurn(ctx context.Context, fn func(context.Context, chat.Sink) (*chat.Outcome, error)) {
	ss.mu.Lock()
	if ss.grant.err() != nil {
		// Revoked: the writer is closing the connection; nothing more runs.
		ss.mu.Unlock()
		return
	}
	if ss.turnCancel != nil {
		ss.mu.Unlock()
		ss.sendError(datachat.ErrReplyInProgress)
		return
	}
	if !ss.s.beginTurn() {
		ss.mu.Unlock()
		ss.sendError(errDrainingTurn)
		return
	}
	// A shutdown whose grace ran out interrupts the turn (chat.ErrInterrupted);
	// chat_cancel or a socket the client closed cancels it, and so does the
	// revocation of the credential (its reason the cause), at once. The end
	// of the session alone does not: a client cut for not keeping up has
	// its answer completed and stored.
	tctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	ss.s.interruptAtStop(tctx, cancel)
	unrevoke := context.AfterFunc(ss.grant.ctx, func() { cancel(ss.grant.err()) })
	tctx = WithRequestID(tctx, NewRequestID())
	ss.turnCancel = func() { cancel(context.Canceled) }
	ss.mu.Unlock()

	ss.turns.Add(1)
	go func() {
		defer ss.turns.Done()
		defer ss.s.endTurn() // after the turn's last event is queued
		defer cancel(nil)
		defer unrevoke()
		sink := ss.send
		start := time.Now()
		out, err := fn(tctx, sink)
		ss.mu.Lock()
		ss.turnCancel = nil // ready for the next turn before the client hears this one ended
		ss.mu.Unlock()
		if err != nil {
			ss.log.Warn("chat turn failed", slog.String("conversation_id", ss.conv.ID), slog.String("error", err.Error()))
			ss.sendError(err)
		} else if out != nil && out.Complete != nil {
			ss.send(chat.Event{Type: chat.EventComplete, Data: out.Complete})
		} else if out != nil && out.Confirmation != nil {
			ss.sendConfirmation(out.Confirmation)
		}
		if out != nil && out.Message != nil {
			ss.log.Info("chat turn", slog.String("conversation_id", ss.conv.ID), slog.String("status", out.Message.Status),
				slog.Int64("input_tokens", out.Usage.Input), slog.Int64("output_tokens", out.Usage.Output),
				slog.Int64("duration_ms", time.Since(start).Milliseconds()))
		}
	}()
}

// cancelTurn cancels the running turn, if any, and reports whether there was one.
func (ss *wsSession) cancelTurn() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.turnCancel == nil {
		return false
	}
	ss.turnCancel()
	return true
}

// closeReason fits a message into a close frame's reason (at most 123
// bytes), cut at a rune boundary.
func closeReason(msg string) string {
	const max = 123
	if len(msg) <= max {
		return msg
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// send encodes an event and queues it for the writer. It never waits: a
// client that falls more than the outbox behind is cut (its turn goes on),
// and once the connection is gone events are dropped.
func (ss *wsSession) send(ev chat.Event) {
	if !ss.out.accepting() {
		return // cut or closed: not even encoded
	}
	b, err := encodeEvent(ev)
	if err != nil {
		ss.log.Error("encode event", slog.String("type", wsEventNames[ev.Type]), slog.String("error", err.Error()))
		return
	}
	ss.out.push(b)
}

// encodeEvent is an event as the WebSocket sends it, {"type", "data"}; a
// token, the most frequent, without reflection.
func encodeEvent(ev chat.Event) ([]byte, error) {
	if tok, ok := ev.Data.(chat.TokenEvent); ok && ev.Type == chat.EventToken {
		b := make([]byte, 0, len(`{"type":"chat_token","data":{"token":""}}`)+len(tok.Token)+8)
		b = append(b, `{"type":"chat_token","data":{"token":`...)
		b = appendJSONString(b, tok.Token)
		return append(b, "}}"...), nil
	}
	return json.Marshal(wsEvent{Type: wsEventNames[ev.Type], Data: ev.Data})
}

func (ss *wsSession) sendConfirmation(c *datachat.Confirmation) {
	ss.send(chat.Event{Type: chat.EventConfirmation, Data: chat.ConfirmationEvent{
		ID: c.ID, Action: c.Action, Parameters: c.Parameters, Explanation: c.Explanation,
	}})
}

func (ss *wsSession) sendError(err error) {
	ss.send(chat.Event{Type: chat.EventError, Data: chat.ErrorEventFor(err)})
}
