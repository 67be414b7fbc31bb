package llmtest

import (
	"fmt"
	"net/http"
)

// What differs between protocols: the framing of a streamed answer and the
// error replies, with a script's explicit fields laid over a preset.

// errorReply is a failure answer rendered for a protocol.
type errorReply struct {
	status      int
	contentType string
	headers     map[string]string
	body        []byte
	message     string
	code        string
}

// frame renders one streamed frame when it is sent.
type frame func() []byte

// wire is what differs between protocols.
type wire interface {
	basePath() string
	defaultModel() string
	route(method, path string) string
	parseChat(req *Request)
	parseEmbed(req *Request)
	apiKey(r *http.Request) string
	streamContentType() string
	frames(req *Request, a *answer) []frame
	whole(req *Request, a *answer) (contentType string, body []byte)
	malformedFrame() []byte
	errorReply(e *ErrorReply, model string) errorReply
	errorFrame(er errorReply) []byte
	embedAnswer(req *Request, model string, vectors [][]float32) []byte
	serveOther(w http.ResponseWriter, r *http.Request, model string) bool
}

func wireFor(p Protocol) (wire, error) {
	switch p {
	case Gemini:
		return geminiWire{}, nil
	case OpenAI:
		return openaiWire{}, nil
	case Ollama:
		return ollamaWire{}, nil
	}
	return nil, fmt.Errorf("llmtest: unknown protocol %q", p)
}

// finishError lays e's explicit fields over a preset reply er and gives it
// its body: e.Body when set; else the preset's recorded body, unless an
// explicit status, message or code replaces what it says; else encode of
// the reply, whose message is the status text when it has none.
func finishError(er errorReply, e *ErrorReply, recorded string, encode func(errorReply) []byte) errorReply {
	if e.Status != 0 || e.Message != "" || e.Code != "" {
		recorded = ""
	}
	er = applyOverrides(er, e)
	switch {
	case e.Body != "":
		er.body = []byte(e.Body)
	case recorded != "":
		er.body = []byte(recorded)
	default:
		if er.message == "" {
			er.message = http.StatusText(er.status)
		}
		er.body = encode(er)
	}
	return er
}

// applyOverrides lays an ErrorReply's explicit fields over a preset.
func applyOverrides(er errorReply, e *ErrorReply) errorReply {
	if e.Status != 0 {
		er.status = e.Status
	}
	if e.Message != "" {
		er.message = e.Message
	}
	if e.Code != "" {
		er.code = e.Code
	}
	if len(e.Headers) > 0 {
		if er.headers == nil {
			er.headers = map[string]string{}
		}
		for k, v := range e.Headers {
			er.headers[k] = v
		}
	}
	return er
}
