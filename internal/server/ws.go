package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

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
	// wsWriteTimeout bounds one event's write to a client that reads too slowly.
	wsWriteTimeout = 10 * time.Second
)

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
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{wsSubprotocol}})
	if err != nil {
		return // Accept has answered the client
	}
	c.SetReadLimit(wsReadLimit)
	s.wsSessions.Add(1)
	defer s.wsSessions.Add(-1)

	sess := &wsSession{s: s, conn: c, user: user, conv: conv, out: make(chan chat.Event, 64), log: s.logger(r)}
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
	out  chan chat.Event
	log  *slog.Logger

	mu         sync.Mutex
	turnCancel func() // set while a turn runs
	turns      sync.WaitGroup
}

// run serves the session until its connection closes: the client closed it,
// stopped answering pings, could not be written to, or the server shut down.
// Three goroutines share the connection: the reader (client messages, pongs),
// the pinger, and the writer, which writes every event and alone closes the
// connection, so nothing queued before a close is lost to it.
func (ss *wsSession) run(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	if p, err := ss.s.Store.PendingConfirmation(ctx, ss.conv.ID); err == nil {
		ss.sendConfirmation(ctx, p) // queued first; the writer starts below
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		ss.readLoop(ctx)
	}()
	// live ends when the client fails a ping: that also stops a write
	// blocked on a client that stopped reading.
	live, gone := context.WithCancelCause(ctx)
	defer gone(nil)
	go ss.pingLoop(live, gone)

	ss.writeLoop(live, readDone)
	// The connection is closed. A streaming turn is cancelled (not one
	// awaiting confirmation: that holds no stream and waits for the next
	// connection); the turn keeps the text streamed so far.
	ss.cancelTurn()
	cancel() // ends the pinger, the reader and sends nobody will write
	<-readDone
	ss.turns.Wait()
}

// readLoop handles the client's messages until the connection fails or closes.
func (ss *wsSession) readLoop(ctx context.Context) {
	for {
		_, data, err := ss.conn.Read(ctx)
		if err != nil {
			return
		}
		msg, err := decodeClientMessage(data)
		if err != nil {
			ss.sendError(ctx, err)
			continue
		}
		ss.handle(ctx, msg)
	}
}

// pingLoop pings the client every ping interval and ends live, with the
// reason, on a ping not answered within the ping timeout: a client that
// stopped reading (or vanished without closing) is found even while a turn's
// events still fit in the kernel's buffers.
func (ss *wsSession) pingLoop(live context.Context, gone context.CancelCauseFunc) {
	interval, timeout := ss.s.cfg.WSPingInterval, ss.s.cfg.WSPingTimeout
	if interval <= 0 {
		interval = defaultPingInterval
	}
	if timeout <= 0 {
		timeout = defaultPingTimeout
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-live.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(live, timeout)
		err := ss.conn.Ping(pctx)
		cancel()
		if err != nil {
			gone(fmt.Errorf("no answer to a ping within %s: %w", timeout, err))
			return
		}
	}
}

// writeLoop writes the session's events in order and owns the connection's
// end: it closes the connection when the reader is done (the client closed or
// broke it), when a ping went unanswered (live ended) or a write failed (the
// client is gone or stopped reading), or, on shutdown, after writing every
// event queued — Shutdown closes s.closing only once no turn runs, and a turn
// queues its last event (chat_complete, or the chat_error of an interrupted
// turn) before it counts as ended.
func (ss *wsSession) writeLoop(live context.Context, readDone <-chan struct{}) {
	for {
		select {
		case ev := <-ss.out:
			if err := ss.write(live, ev); err != nil {
				ss.drop(live, err)
				return
			}
		case <-readDone:
			ss.conn.CloseNow()
			return
		case <-live.Done():
			ss.drop(live, nil)
			return
		case <-ss.s.closing:
			for queued := true; queued; {
				select {
				case ev := <-ss.out:
					if err := ss.write(live, ev); err != nil {
						ss.drop(live, err)
						return
					}
				default:
					queued = false
				}
			}
			ss.conn.Close(websocket.StatusGoingAway, "the server is restarting")
			return
		}
	}
}

// drop closes the connection of a client that is gone or stopped reading.
func (ss *wsSession) drop(live context.Context, err error) {
	if cause := context.Cause(live); cause != nil && !errors.Is(cause, context.Canceled) {
		// An unanswered ping (which also ended a blocked write).
		ss.log.Info("websocket client gone: closing", slog.String("conversation_id", ss.conv.ID), slog.String("error", cause.Error()))
	} else if err != nil {
		ss.log.Debug("websocket write failed: closing", slog.String("conversation_id", ss.conv.ID), slog.String("error", err.Error()))
	}
	ss.conn.CloseNow()
}

// write writes one event, waiting at most wsWriteTimeout for the client.
func (ss *wsSession) write(live context.Context, ev chat.Event) error {
	name := wsEventNames[ev.Type]
	b, err := json.Marshal(wsEvent{Type: name, Data: ev.Data})
	if err != nil {
		ss.log.Error("encode event", slog.String("type", name), slog.String("error", err.Error()))
		return nil
	}
	wctx, cancel := context.WithTimeout(live, wsWriteTimeout)
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
	if ss.turnCancel != nil {
		ss.mu.Unlock()
		ss.sendError(ctx, datachat.ErrReplyInProgress)
		return
	}
	if !ss.s.beginTurn() {
		ss.mu.Unlock()
		ss.sendError(ctx, errDrainingTurn)
		return
	}
	// A shutdown whose grace ran out interrupts the turn (chat.ErrInterrupted);
	// chat_cancel or a closed socket cancels it.
	tctx, cancel := context.WithCancelCause(ctx)
	ss.s.interruptAtStop(tctx, cancel)
	tctx = WithRequestID(tctx, NewRequestID())
	ss.turnCancel = func() { cancel(context.Canceled) }
	ss.mu.Unlock()

	ss.turns.Add(1)
	go func() {
		defer ss.turns.Done()
		defer ss.s.endTurn() // after the turn's last event is queued
		defer cancel(nil)
		sink := func(ev chat.Event) { ss.send(ctx, ev) }
		start := time.Now()
		out, err := fn(tctx, sink)
		ss.mu.Lock()
		ss.turnCancel = nil // ready for the next turn before the client hears this one ended
		ss.mu.Unlock()
		if err != nil {
			ss.log.Warn("chat turn failed", slog.String("conversation_id", ss.conv.ID), slog.String("error", err.Error()))
			ss.sendError(ctx, err)
		} else if out != nil && out.Complete != nil {
			ss.send(ctx, chat.Event{Type: chat.EventComplete, Data: out.Complete})
		} else if out != nil && out.Confirmation != nil {
			ss.sendConfirmation(ctx, out.Confirmation)
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

// send queues an event for the writer; it waits while the client is slow, and
// drops the event once the connection is gone.
func (ss *wsSession) send(ctx context.Context, ev chat.Event) {
	select {
	case ss.out <- ev:
	case <-ctx.Done():
	}
}

func (ss *wsSession) sendConfirmation(ctx context.Context, c *datachat.Confirmation) {
	ss.send(ctx, chat.Event{Type: chat.EventConfirmation, Data: chat.ConfirmationEvent{
		ID: c.ID, Action: c.Action, Parameters: c.Parameters, Explanation: c.Explanation,
	}})
}

func (ss *wsSession) sendError(ctx context.Context, err error) {
	ss.send(ctx, chat.Event{Type: chat.EventError, Data: chat.ErrorEventFor(err)})
}
