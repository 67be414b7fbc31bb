package llm

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"datachat"
)

// ErrIncomplete is the cause of a stream that ended, without a read error,
// before the provider's end marker (Ollama's done:true, OpenAI's [DONE] or
// finish_reason, Gemini's finishReason). It counts as a dropped connection.
var ErrIncomplete = errors.New("stream ended before the answer was complete")

// timeoutError is the cause a request is cancelled with when a phase of it
// takes too long.
type timeoutError struct {
	phase string // "connect", "write" or "idle"
	after time.Duration
}

func (e *timeoutError) Error() string {
	switch e.phase {
	case "connect":
		return fmt.Sprintf("no connection within %s", e.after)
	case "write":
		return fmt.Sprintf("sending the request took longer than %s", e.after)
	default:
		return fmt.Sprintf("no data from the provider for %s", e.after)
	}
}

func (e *timeoutError) Timeout() bool { return true }

// StatusError returns the error for an HTTP answer with a failure status,
// its kind chosen from the status alone (401/403 auth, 429 rate limited, 5xx
// unavailable, other 4xx bad request). message is the provider's own text.
// Provider packages call it after checking for what the status alone cannot
// tell (a context-too-large 400, Gemini's bad key answered with 400).
func StatusError(p Provider, status int, message string) *datachat.ProviderError {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return AuthError(p, status, message)
	case status == http.StatusTooManyRequests:
		return RateLimitError(p, status, message, 0)
	case status >= 500:
		reason := fmt.Sprintf("The provider had an internal error (%s)", statusText(status))
		if status == http.StatusServiceUnavailable || status == http.StatusBadGateway || status == http.StatusGatewayTimeout || status == 529 {
			reason = fmt.Sprintf("The provider is unavailable or overloaded (%s)", statusText(status))
		}
		return &datachat.ProviderError{
			Provider: p.Name, Kind: datachat.ProviderUnavailable, Status: status,
			Reason:          reason,
			SuggestedAction: "Wait a minute and try again",
			Err:             messageErr(message),
		}
	default:
		reason := fmt.Sprintf("The provider rejected the request (%s)", statusText(status))
		if m := firstLine(message); m != "" {
			reason += ": " + m
		}
		action := "Check CHAT_MODEL and the provider settings"
		if p.URLVar != "" {
			action = fmt.Sprintf("Check CHAT_MODEL and %s", p.URLVar)
		}
		return &datachat.ProviderError{
			Provider: p.Name, Kind: datachat.ProviderBadRequest, Status: status,
			Reason: reason, SuggestedAction: action, Err: messageErr(message),
		}
	}
}

// AuthError returns the error for a rejected API key or missing permission.
func AuthError(p Provider, status int, message string) *datachat.ProviderError {
	reason := "Invalid API key"
	if status == http.StatusForbidden {
		reason = "Access denied"
	}
	if status != 0 {
		reason += " (" + statusText(status) + ")"
	}
	action := "Check the provider's access settings"
	if p.KeyVar != "" {
		action = "Check " + p.KeyVar
	}
	return &datachat.ProviderError{
		Provider: p.Name, Kind: datachat.ProviderAuth, Status: status,
		Reason: reason, SuggestedAction: action, Err: messageErr(message),
	}
}

// RateLimitError returns the error for a 429; retryAfter is 0 when the
// provider did not say.
func RateLimitError(p Provider, status int, message string, retryAfter time.Duration) *datachat.ProviderError {
	action := "Wait and try again"
	if retryAfter > 0 {
		action = fmt.Sprintf("Wait %s and try again", retryAfter.Round(time.Second))
	}
	return &datachat.ProviderError{
		Provider: p.Name, Kind: datachat.ProviderRateLimited, Status: status,
		Reason:          fmt.Sprintf("Rate limit or quota exceeded (%s)", statusText(status)),
		SuggestedAction: action, RetryAfter: retryAfter, Err: messageErr(message),
	}
}

// ContextTooLargeError returns the error for a prompt longer than the model's
// context window.
func ContextTooLargeError(p Provider, status int, message string) *datachat.ProviderError {
	return &datachat.ProviderError{
		Provider: p.Name, Kind: datachat.ProviderContextTooLarge, Status: status,
		Reason:          "The conversation is too long for the model's context window",
		SuggestedAction: "Start a new conversation",
		Err:             messageErr(message),
	}
}

// MalformedError returns the error for stream data that cannot be decoded.
func MalformedError(p Provider, err error) *datachat.ProviderError {
	action := "Try again"
	if p.URLVar != "" {
		action = fmt.Sprintf("Try again; if it keeps happening, check that %s points to a %s server", p.URLVar, p.Name)
	}
	return &datachat.ProviderError{
		Provider: p.Name, Kind: datachat.ProviderMalformed,
		Reason: "The provider sent data that could not be read", SuggestedAction: action, Err: err,
	}
}

// RequestError returns the error for a model request that cannot be converted
// to the provider's wire format; it is never sent.
func RequestError(p Provider, err error) *datachat.ProviderError {
	return &datachat.ProviderError{
		Provider: p.Name, Kind: datachat.ProviderBadRequest,
		Reason: "The request could not be built: " + err.Error(), SuggestedAction: "Report this as a bug", Err: err,
	}
}

// NotConfiguredError returns the error of a provider missing its settings.
func NotConfiguredError(p Provider, what string) *datachat.ProviderError {
	action := "Configure the LLM provider"
	if p.KeyVar != "" {
		action = "Set " + p.KeyVar
	}
	return &datachat.ProviderError{
		Provider: p.Name, Kind: datachat.ProviderNotConfigured,
		Reason: what, SuggestedAction: action,
	}
}

func badURLError(p Provider, err error) *datachat.ProviderError {
	action := "Check the provider's URL"
	if p.URLVar != "" {
		action = "Check " + p.URLVar
	}
	return &datachat.ProviderError{
		Provider: p.Name, Kind: datachat.ProviderNotConfigured,
		Reason: "The provider URL is not valid", SuggestedAction: action, Err: err,
	}
}

func timeoutProviderError(p Provider, cause *timeoutError) *datachat.ProviderError {
	action := "Try again; check the network"
	if cause.phase == "idle" {
		action = "Try again; for slow models raise LLM_STREAM_IDLE_TIMEOUT"
	}
	return &datachat.ProviderError{
		Provider: p.Name, Kind: datachat.ProviderTimeout,
		Reason: "The provider timed out: " + cause.Error(), SuggestedAction: action, Err: cause,
	}
}

func connectionProviderError(p Provider, err error, answered bool) *datachat.ProviderError {
	reason := "Could not reach the provider"
	if answered {
		reason = "The connection to the provider was lost"
	}
	action := "Check the network and try again"
	if p.URLVar != "" {
		action = fmt.Sprintf("Check that %s is reachable and try again", p.URLVar)
	}
	return &datachat.ProviderError{
		Provider: p.Name, Kind: datachat.ProviderConnection,
		Reason: reason, SuggestedAction: action, Err: err,
	}
}

// retryable reports whether err may be retried (once, after the retry
// delay): a connection error or a timeout, never an answer of the provider.
func retryable(err error) bool {
	var pe *datachat.ProviderError
	if !errors.As(err, &pe) {
		return false
	}
	return pe.Kind == datachat.ProviderConnection || pe.Kind == datachat.ProviderTimeout
}

// contextLimitPhrases are what providers say when a prompt is too long:
// OpenAI ("maximum context length", code context_length_exceeded), Gemini ("The
// input token count (N) exceeds the maximum number of tokens allowed (M)"),
// Ollama and OpenAI-compatible servers (vLLM, llama.cpp, LM Studio).
var contextLimitPhrases = []string{
	"context_length_exceeded",
	"maximum context length",
	"context length",
	"context window",
	"context size",
	"exceeds the maximum number of tokens",
	"input token count",
	"num_ctx",
	"prompt is too long",
	"too many tokens",
	"exceed_context_size",
}

// MentionsContextLimit reports whether a provider's error message says the
// prompt does not fit the model's context window.
func MentionsContextLimit(message string) bool {
	m := strings.ToLower(message)
	for _, p := range contextLimitPhrases {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}

// RetryAfter reads the Retry-After header (seconds or an HTTP date) or
// OpenAI's retry-after-ms; 0 if absent.
func RetryAfter(h http.Header) time.Duration {
	if ms := h.Get("Retry-After-Ms"); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v > 0 {
			return clampWait(v * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if !(s > 0) { // also NaN
			return 0
		}
		return clampWait(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// maxWait caps a provider's Retry-After: a day is already absurd, and larger
// values (1e300, +Inf) would overflow a time.Duration into a negative one.
const maxWait = 24 * time.Hour

func clampWait(ns float64) time.Duration {
	if ns >= float64(maxWait) {
		return maxWait
	}
	return time.Duration(ns)
}

func statusText(status int) string {
	if t := http.StatusText(status); t != "" {
		return fmt.Sprintf("%d %s", status, t)
	}
	return fmt.Sprintf("HTTP %d", status)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// messageErr wraps a provider's message as the cause of a ProviderError.
func messageErr(message string) error {
	message = strings.TrimSpace(message)
	if message == "" {
		return nil
	}
	return errors.New(message)
}
