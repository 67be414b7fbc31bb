package chat

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"datachat"
	"datachat/internal/sqlite/sqlitetest"
)

// slowModel streams n tokens, one every delay, and reports each one sent.
type slowModel struct {
	n     int
	delay time.Duration
	sent  chan string
}

func (m slowModel) Stream(ctx context.Context, _ *datachat.ModelRequest, emit func(datachat.ModelEvent) error) error {
	for i := range m.n {
		select {
		case <-ctx.Done():
			return &datachat.ProviderError{Kind: datachat.ProviderConnection, Reason: "cancelled", Err: ctx.Err()}
		case <-time.After(m.delay):
		}
		tok := "t" + string(rune('a'+i%26)) + " "
		if err := emit(datachat.ModelEvent{Text: tok}); err != nil {
			return err
		}
		if m.sent != nil {
			m.sent <- tok
		}
	}
	return emit(datachat.ModelEvent{Usage: &datachat.TokenCount{Input: 10, Output: int64(m.n)}})
}

func leaseRunner(t *testing.T, model Model) (*Runner, *datachat.User, *datachat.Conversation) {
	t.Helper()
	st := sqlitetest.Open(t)
	u, c := sqlitetest.Conversation(t, st, "alice")
	r := &Runner{
		Store: st, Data: newBenchData(), Model: model, ModelID: "m", Window: 128_000, MaxQueryChars: 2000,
		Streaming: true, Logger: slog.New(slog.DiscardHandler), LeaseOwner: "me", LeaseNode: "host/127.0.0.1:1",
	}
	return r, u, c
}

// TestLeaseRenewedWhileStreaming runs a turn longer than its lease: the
// flusher renews it, so another process sweeping for left-behind messages
// leaves the turn alone, and a second turn is refused until it ends.
func TestLeaseRenewedWhileStreaming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sent := make(chan string)
		r, u, c := leaseRunner(t, slowModel{n: 24, delay: 50 * time.Millisecond, sent: sent})
		r.LeaseTTL = 300 * time.Millisecond // renewed every 100 ms; the turn lasts 1.2 s
		var wg sync.WaitGroup
		var out *Outcome
		var err error
		wg.Go(func() { out, err = r.Send(context.Background(), u, c.ID, "long answer please", TurnOptions{}, nil) })

		for range 14 { // 700 ms: more than twice the TTL
			<-sent
		}
		synctest.Wait() // the flusher has done what is due by now
		n, serr := r.Store.(datachat.Store).InterruptStreaming(t.Context(), time.Now(), "another-process", "host/127.0.0.1:2")
		if serr != nil || n != 0 {
			t.Errorf("another process's sweep during the turn: interrupted %d (%v), want 0: the lease is renewed", n, serr)
		}
		other := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
		berr := r.Store.BeginTurn(t.Context(), nil, other, datachat.Lease{Owner: "another-process", Until: time.Now().Add(time.Second)}, time.Now())
		if datachat.ErrorCode(berr) != datachat.ECONFLICT {
			t.Errorf("another process's turn during this one: got %v, want ECONFLICT", berr)
		}
		go func() {
			for range sent {
			}
		}()
		wg.Wait()
		close(sent)
		if err != nil || out.Message.Status != datachat.StatusComplete || strings.Count(out.Message.Content, " ") != 24 {
			t.Fatalf("turn: %v, %+v", err, out)
		}
	})
}

// TestInterruptedByShutdown cancels a turn the way a shutdown does (cause
// ErrInterrupted): the answer so far is stored as interrupted, not cancelled,
// and the caller gets EBUSY to tell the client.
func TestInterruptedByShutdown(t *testing.T) {
	sent := make(chan string, 100)
	r, u, c := leaseRunner(t, slowModel{n: 100, delay: 20 * time.Millisecond, sent: sent})
	ctx, cancel := context.WithCancelCause(context.Background())
	var got strings.Builder
	var mu sync.Mutex
	sink := func(ev Event) {
		if ev.Type == EventToken {
			mu.Lock()
			got.WriteString(ev.Data.(TokenEvent).Token)
			mu.Unlock()
		}
	}
	go func() {
		for range 5 {
			<-sent
		}
		cancel(ErrInterrupted)
	}()
	out, err := r.Send(ctx, u, c.ID, "tell me everything", TurnOptions{}, sink)
	if datachat.ErrorCode(err) != datachat.EBUSY || out == nil {
		t.Fatalf("Send: got %v, %v; want EBUSY and the outcome", out, err)
	}
	if out.Complete != nil {
		t.Errorf("an interrupted turn sends no chat_complete, got %+v", out.Complete)
	}
	msgs, err := r.Store.Messages(t.Context(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if m := msgs[len(msgs)-1]; m.Status != datachat.StatusInterrupted || m.Content != got.String() || m.Content == "" {
		t.Errorf("stored answer: %s %q; want interrupted with what the client got, %q", m.Status, m.Content, got.String())
	}
}
