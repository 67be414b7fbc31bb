package server

import (
	"context"
	"encoding/json"
	"errors"
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
	case "chat_send":
		var d struct {
			Content string `json:"content"`
		}
		if err := json.Unmarshal(env.Data, &d); err != nil {
			return msg, datachat.Errorf(datachat.EINVALID, "chat_send needs {\"content\": \"…\"}.")
		}
		msg.Content = d.Content
	case "confirm_action":
		var d struct {
			ID       string `json:"id"`
			Approved *bool  `json:"approved"`
			Note     string `json:"note"`
		}
		if err := json.Unmarshal(env.Data, &d); err != nil || d.ID == "" || d.Approved == nil {
			return msg, datachat.Errorf(datachat.EINVALID, "confirm_action needs {\"id\", \"approved\": true|false, \"note\"?}.")
		}
		msg.ID, msg.Approved, msg.Note = d.ID, *d.Approved, d.Note
	case "chat_cancel":
	default:
		return msg, datachat.Errorf(datachat.EINVALID, "Unknown message type %q: want chat_send, chat_cancel or confirm_action.", env.Type)
	}
	return msg, nil
}

// serveWS runs the chat protocol of one conversation over a WebSocket. Auth and
// the conversation are checked before the upgrade, so a failure is a plain
// HTTP 401 or 404.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	user := UserFrom(r.Context())
	conv, err := s.Store.Conversation(r.Context(), user.ID, r.URL.Query().Get("conversation_id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	// Counted before the upgrade: once hijacked, http.Server.Shutdown no
	// longer sees the connection, and Shutdown waits on wsWG instead.
	s.wsWG.Add(1)
	defer s.wsWG.Done()
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered the client
	}
	c.SetReadLimit(wsReadLimit)
	s.wsSessions.Add(1)
	defer s.wsSessions.Add(-1)

	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	sess := &wsSession{s: s, conn: c, user: user, conv: conv, out: make(chan chat.Event, 64), log: s.logger(r)}
	go func() { // the server shutting down ends the session (its turns have ended)
		select {
		case <-s.closing:
			sess.goAway()
			cancel()
		case <-ctx.Done():
		}
	}()
	sess.run(ctx)
	c.Close(websocket.StatusNormalClosure, "")
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

func (ss *wsSession) run(ctx context.Context) {
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		ss.writeLoop(ctx)
	}()

	if p, err := ss.s.Store.PendingConfirmation(ctx, ss.conv.ID); err == nil {
		ss.sendConfirmation(ctx, p)
	}

	for {
		_, data, err := ss.conn.Read(ctx)
		if err != nil {
			break // closed by the client, or the server is shutting down
		}
		msg, err := decodeClientMessage(data)
		if err != nil {
			ss.sendError(ctx, err)
			continue
		}
		ss.handle(ctx, msg)
	}
	// A closed socket cancels a streaming turn (not one awaiting confirmation:
	// that holds no stream and waits for the next connection).
	ss.cancelTurn()
	ss.turns.Wait()
	close(ss.out)
	<-writerDone
}

func (ss *wsSession) handle(ctx context.Context, msg clientMessage) {
	switch msg.Type {
	case "chat_send":
		ss.startTurn(ctx, func(tctx context.Context, sink chat.Sink) (*chat.Outcome, error) {
			return ss.s.Chat.Send(tctx, ss.user, ss.conv.ID, msg.Content, chat.TurnOptions{}, sink)
		})
	case "confirm_action":
		ss.startTurn(ctx, func(tctx context.Context, sink chat.Sink) (*chat.Outcome, error) {
			return ss.s.Chat.Confirm(tctx, ss.user, ss.conv.ID, msg.ID, msg.Approved, msg.Note, sink)
		})
	case "chat_cancel":
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
		ss.sendError(ctx, datachat.Errorf(datachat.ECONFLICT, "A reply is still being written; wait for it or stop it first."))
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
	stop := context.AfterFunc(ss.s.stopCtx, func() { cancel(chat.ErrInterrupted) })
	tctx = WithRequestID(tctx, NewRequestID())
	ss.turnCancel = func() { cancel(context.Canceled) }
	ss.mu.Unlock()

	ss.turns.Add(1)
	go func() {
		defer ss.turns.Done()
		defer ss.s.endTurn() // after the turn's last event is queued
		defer stop()
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
			ss.send(ctx, chat.Event{Type: "chat_complete", Data: out.Complete})
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

// goAway closes the connection as going away once the events queued for it
// are written (for up to two seconds): the last chat_complete or chat_error of
// a turn that ended as the server shut down reaches the client.
func (ss *wsSession) goAway() {
	for deadline := time.Now().Add(2 * time.Second); len(ss.out) > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	ss.conn.Close(websocket.StatusGoingAway, "the server is restarting")
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
	ss.send(ctx, chat.Event{Type: "confirmation_required", Data: chat.ConfirmationEvent{
		ID: c.ID, Action: c.Action, Parameters: c.Parameters, Explanation: c.Explanation,
	}})
}

func (ss *wsSession) sendError(ctx context.Context, err error) {
	ss.send(ctx, chat.Event{Type: "chat_error", Data: chat.ErrorEventFor(err)})
}

func (ss *wsSession) writeLoop(ctx context.Context) {
	for ev := range ss.out {
		b, err := json.Marshal(ev)
		if err != nil {
			ss.log.Error("encode event", slog.String("type", ev.Type), slog.String("error", err.Error()))
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = ss.conn.Write(wctx, websocket.MessageText, b)
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			ss.log.Debug("websocket write", slog.String("error", err.Error()))
		}
	}
}
