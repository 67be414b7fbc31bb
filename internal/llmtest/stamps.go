package llmtest

import (
	"encoding/json"
	"io"
	"time"

	"datachat/internal/llm"
)

// ReadStampedStream reads a streamed Chat Completions answer sent with
// StampTime to its end and calls got for each stamp in its text deltas
// with the latency from the stamp to when its chunk was read. It stops
// quietly at the first read error, as a load test that counts stamps
// wants; chunks without a delta are passed over.
func ReadStampedStream(body io.Reader, got func(latency time.Duration)) {
	sse := llm.NewSSEReader(body)
	for {
		ev, err := sse.Next()
		at := time.Now()
		if err != nil {
			return
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(ev.Data), &chunk) != nil || len(chunk.Choices) == 0 {
			continue
		}
		stamps, _ := Stamps(chunk.Choices[0].Delta.Content)
		for _, st := range stamps {
			got(at.Sub(st))
		}
	}
}
