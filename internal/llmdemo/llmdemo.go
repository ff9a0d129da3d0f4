// Package llmdemo answers POST /v1/chat/completions as an OpenAI-compatible
// LLM API does, without a model: an upstream for the cost guide and the
// tests to put serve in front of. Token counts follow from the request, so
// that the same request always reports the same usage:
//
//   - prompt_tokens: 3 for each message plus its text's bytes ÷ 4 (rounded
//     up), and 3 for the reply, as OpenAI's cookbook counts a chat prompt;
//   - completion_tokens: Options.CompletionTokens, or the request's
//     max_completion_tokens (else max_tokens) when that is smaller, which
//     ends the answer with finish_reason "length";
//   - total_tokens: their sum.
//
// With "stream": true the answer is a text/event-stream of
// chat.completion.chunk events, one generated token each, and data: [DONE];
// with "stream_options": {"include_usage": true} every chunk carries
// "usage": null and one more chunk before [DONE] carries the usage with
// empty choices, as OpenAI sends it.
package llmdemo

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Options shape the answers. The zero value answers 300 tokens at once.
type Options struct {
	// CompletionTokens is the length of an answer that no max_tokens cuts
	// short; 0 means 300.
	CompletionTokens int
	// TokenDelay is the time each generated token takes: between two
	// chunks of a stream, and times the completion tokens before a JSON
	// answer.
	TokenDelay time.Duration
	// Model answers a request that names none; "" means "demo".
	Model string
	// Now stamps the answers' created; nil means time.Now.
	Now func() time.Time
}

// maxBody bounds what a request may send: a demo needs no more.
const maxBody = 1 << 20

// words are the generated text, one token each, cycled.
var words = []string{"Rate", " limits", " keep", " an", " API", " fair", ":", " each", " client", " gets", " its", " share", "."}

// Handler returns the API. It is safe for concurrent use: requests share
// only the id counter.
func Handler(o Options) http.Handler {
	if o.CompletionTokens <= 0 {
		o.CompletionTokens = 300
	}
	if o.Model == "" {
		o.Model = "demo"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &handler{o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", h.chat)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, fmt.Sprintf("Unknown request URL: %s %s. This demo answers POST /v1/chat/completions.", r.Method, r.URL.Path))
	})
	return mux
}

type handler struct {
	o   Options
	ids atomic.Uint64
}

// request is what the handler reads of a chat completion request.
type request struct {
	Model               string    `json:"model"`
	Messages            []message `json:"messages"`
	MaxTokens           *int      `json:"max_tokens"`
	MaxCompletionTokens *int      `json:"max_completion_tokens"`
	Stream              bool      `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Usage is the usage object of an answer.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// text is a message's content: a string, or the text of its parts.
func (m message) text() (string, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", fmt.Errorf("content must be a string or an array of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// usage counts the tokens of a request as the package comment says, and
// whether the answer is cut short by the request's maximum.
func (h *handler) usage(req request) (Usage, bool, error) {
	prompt := 3
	for i, m := range req.Messages {
		t, err := m.text()
		if err != nil {
			return Usage{}, false, fmt.Errorf("messages[%d]: %w", i, err)
		}
		prompt += 3 + (len(t)+3)/4
	}
	completion, cut := h.o.CompletionTokens, false
	limit := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		limit = req.MaxCompletionTokens
	}
	if limit != nil {
		if *limit < 1 {
			return Usage{}, false, fmt.Errorf("max_tokens must be at least 1, got %d", *limit)
		}
		if *limit < completion {
			completion, cut = *limit, true
		}
	}
	return Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}, cut, nil
}

func (h *handler) chat(w http.ResponseWriter, r *http.Request) {
	// The whole body is read before answering, as an API server does: a
	// body left unread while the answer streams makes net/http close the
	// connection under a proxy still sending it.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		apiError(w, http.StatusBadRequest, "We could not read the body of your request: "+err.Error())
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		apiError(w, http.StatusBadRequest, "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	if len(req.Messages) == 0 {
		apiError(w, http.StatusBadRequest, "messages: at least one message is required")
		return
	}
	u, cut, err := h.usage(req)
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	model := req.Model
	if model == "" {
		model = h.o.Model
	}
	finish := "stop"
	if cut {
		finish = "length"
	}
	a := answer{
		id:      fmt.Sprintf("chatcmpl-demo%d", h.ids.Add(1)),
		created: h.o.Now().Unix(),
		model:   model,
		usage:   u,
		finish:  finish,
	}
	if req.Stream {
		h.stream(w, r, a, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	if !h.wait(r, time.Duration(u.CompletionTokens)*h.o.TokenDelay) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id":      a.id,
		"object":  "chat.completion",
		"created": a.created,
		"model":   a.model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": generated(u.CompletionTokens), "refusal": nil},
			"logprobs":      nil,
			"finish_reason": a.finish,
		}},
		"usage":              a.usage,
		"system_fingerprint": nil,
	})
}

// answer is what every chunk of one answer repeats.
type answer struct {
	id      string
	created int64
	model   string
	usage   Usage
	finish  string
}

// chunk is one chat.completion.chunk event.
func (a answer) chunk(choices []any, usage any, withUsage bool) map[string]any {
	c := map[string]any{
		"id":                 a.id,
		"object":             "chat.completion.chunk",
		"created":            a.created,
		"model":              a.model,
		"system_fingerprint": nil,
		"choices":            choices,
	}
	if withUsage {
		c["usage"] = usage
	}
	return c
}

func choice(delta map[string]any, finish any) []any {
	return []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
}

// stream writes the answer as server-sent events: the role, one chunk per
// token, the finish reason, the usage chunk when asked for, and [DONE].
func (h *handler) stream(w http.ResponseWriter, r *http.Request, a answer, withUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	send := func(v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if !send(a.chunk(choice(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil), nil, withUsage)) {
		return
	}
	for i := range a.usage.CompletionTokens {
		if !h.wait(r, h.o.TokenDelay) || !send(a.chunk(choice(map[string]any{"content": token(i)}, nil), nil, withUsage)) {
			return
		}
	}
	if !send(a.chunk(choice(map[string]any{}, a.finish), nil, withUsage)) {
		return
	}
	if withUsage && !send(a.chunk([]any{}, a.usage, true)) {
		return
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// wait sleeps d, and says false when the client went away meanwhile.
func (h *handler) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return r.Context().Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// token is the i-th token of every answer.
func token(i int) string {
	if i > 0 && i%len(words) == 0 {
		return " " + words[0]
	}
	return words[i%len(words)]
}

// generated is the text of n tokens.
func generated(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(token(i))
	}
	return b.String()
}

// apiError answers as OpenAI's API does when it refuses a request.
func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": nil, "code": nil,
	}})
}
