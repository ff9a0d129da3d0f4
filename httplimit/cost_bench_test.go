package httplimit

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// chatRequest is an OpenAI-style request body of about 2 KB, max_tokens after the messages.
var chatRequest = `{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"`+strings.Repeat("lorem ipsum ", 12)+`"},`, 12) +
	`{"role":"user","content":"hi"}],"max_tokens":800,"stream":false}`

// BenchmarkEstimateFromJSON reads max_tokens out of a request body, as admission does.
func BenchmarkEstimateFromJSON(b *testing.B) {
	e := Estimate{Default: 100, JSON: "max_tokens"}
	body := strings.NewReader(chatRequest)
	r, _ := http.NewRequest("POST", "http://x/v1/chat", nil)
	b.ReportAllocs()
	for b.Loop() {
		body.Reset(chatRequest)
		r.Body = io.NopCloser(body)
		if n, _ := e.of(r, 100000); n != 800 {
			b.Fatalf("estimate %d", n)
		}
	}
}

// chatAnswer is a JSON answer of about 4 KB that ends with its usage.
var chatAnswer = []byte(`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("lorem ipsum ", 340) +
	`"}}],"usage":{"prompt_tokens":12,"completion_tokens":300,"total_tokens":312}}`)

// BenchmarkCostFromJSON reads usage.total_tokens out of a JSON answer as it streams through.
func BenchmarkCostFromJSON(b *testing.B) {
	b.ReportAllocs()
	c := costReader{from: CostFrom{JSON: "usage.total_tokens"}}
	for b.Loop() {
		c = costReader{from: c.from, tail: c.tail[:0]}
		c.write(chatAnswer)
		c.end(http.Header{}, false)
		if !c.found || c.cost != 312 {
			b.Fatalf("cost %d found %v", c.cost, c.found)
		}
	}
}

// BenchmarkCostFromSSE reads usage.total_tokens out of an event stream of 40 chunks.
func BenchmarkCostFromSSE(b *testing.B) {
	stream := []byte(strings.Repeat(`data: {"choices":[{"delta":{"content":"lorem ipsum"}}]}`+"\n\n", 40) +
		`data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":300,"total_tokens":312}}` + "\n\ndata: [DONE]\n\n")
	b.ReportAllocs()
	c := costReader{from: CostFrom{JSON: "usage.total_tokens"}, sse: true}
	for b.Loop() {
		c = costReader{from: c.from, sse: true, line: c.line[:0], event: c.event[:0]}
		c.write(stream)
		c.end(http.Header{}, false)
		if !c.found || c.cost != 312 {
			b.Fatalf("cost %d found %v", c.cost, c.found)
		}
	}
}
