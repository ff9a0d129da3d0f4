package llmdemo

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// completion is a chat completion as OpenAI's clients decode it.
type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage `json:"usage"`
}

// chunk is a chat.completion.chunk as OpenAI's clients decode it; Usage
// stays a raw value to tell null from absent.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads a text/event-stream as OpenAI's SDKs do: the data lines
// of each event, up to data: [DONE].
func events(t *testing.T, r io.Reader) (chunks []chunk, done bool) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(d, " "))
			} else {
				t.Errorf("a line that is no data line: %q", line)
			}
			continue
		}
		if len(data) == 0 {
			continue
		}
		ev := strings.Join(data, "\n")
		data = nil
		if ev == "[DONE]" {
			if sc.Scan() || sc.Text() != "" {
				t.Errorf("more after [DONE]: %q", sc.Text())
			}
			return chunks, true
		}
		var c chunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		chunks = append(chunks, c)
	}
	return chunks, false
}

func TestAChatCompletionReportsTheUsageItsRequestImplies(t *testing.T) {
	at := time.Date(2027, 2, 10, 3, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(Handler(Options{Now: func() time.Time { return at }}))
	defer srv.Close()
	tests := []struct {
		name, body   string
		usage        Usage
		finishReason string
	}{
		{"one short message, max_tokens above the answer's 300",
			`{"model": "m", "max_tokens": 800, "messages": [{"role": "user", "content": "Say hello in Japanese."}]}`,
			Usage{PromptTokens: 3 + 3 + 6, CompletionTokens: 300, TotalTokens: 312}, "stop"},
		{"max_tokens below 300 cuts the answer short",
			`{"model": "m", "max_tokens": 20, "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]}`,
			Usage{PromptTokens: 3 + (3 + 3) + (3 + 1), CompletionTokens: 20, TotalTokens: 33}, "length"},
		{"max_completion_tokens wins over max_tokens, content parts count their text",
			`{"max_tokens": 5, "max_completion_tokens": 7, "messages": [{"role": "user", "content": [{"type": "text", "text": "12345678"}]}]}`,
			Usage{PromptTokens: 3 + 3 + 2, CompletionTokens: 7, TotalTokens: 15}, "length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, srv.URL, tt.body)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			var c completion
			if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
				t.Fatal(err)
			}
			if c.Object != "chat.completion" || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Created != at.Unix() || c.Model == "" {
				t.Errorf("id %q, object %q, created %d, model %q", c.ID, c.Object, c.Created, c.Model)
			}
			if c.Usage == nil || *c.Usage != tt.usage {
				t.Errorf("usage %+v, want %+v", c.Usage, tt.usage)
			}
			if len(c.Choices) != 1 || c.Choices[0].Message.Role != "assistant" || c.Choices[0].FinishReason != tt.finishReason {
				t.Fatalf("choices %+v", c.Choices)
			}
			if got := c.Choices[0].Message.Content; got != generated(tt.usage.CompletionTokens) || got == "" {
				t.Errorf("content %q", got)
			}
		})
	}
}

func TestAStreamSendsOneChunkPerTokenAndTheUsageWhenAskedThenDone(t *testing.T) {
	srv := httptest.NewServer(Handler(Options{CompletionTokens: 40}))
	defer srv.Close()
	for _, includeUsage := range []bool{true, false} {
		body := `{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}`
		if includeUsage {
			body = `{"model": "m", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 25, "messages": [{"role": "user", "content": "hi"}]}`
		}
		resp := post(t, srv.URL, body)
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("Content-Type %q", ct)
		}
		chunks, done := events(t, resp.Body)
		if !done {
			t.Fatalf("include_usage %v: no data: [DONE]", includeUsage)
		}
		var text strings.Builder
		var usage *Usage
		finish := ""
		for i, c := range chunks {
			if c.Object != "chat.completion.chunk" || c.ID != chunks[0].ID || c.Created != chunks[0].Created || c.Model != "m" {
				t.Errorf("chunk %d: id %q, object %q, created %d, model %q", i, c.ID, c.Object, c.Created, c.Model)
			}
			switch {
			case !includeUsage && c.Usage != nil:
				t.Errorf("chunk %d has usage %s without include_usage", i, c.Usage)
			case includeUsage && string(c.Usage) == "null":
			case includeUsage:
				if i != len(chunks)-1 || len(c.Choices) != 0 {
					t.Errorf("chunk %d of %d has usage %s with choices %v: want it last, with none", i, len(chunks), c.Usage, c.Choices)
				}
				usage = new(Usage)
				if err := json.Unmarshal(c.Usage, usage); err != nil {
					t.Fatal(err)
				}
			}
			for _, ch := range c.Choices {
				text.WriteString(ch.Delta.Content)
				if ch.FinishReason != nil {
					finish = *ch.FinishReason
				}
			}
		}
		want, wantFinish := 40, "stop"
		if includeUsage {
			want, wantFinish = 25, "length"
			if usage == nil || *usage != (Usage{PromptTokens: 7, CompletionTokens: 25, TotalTokens: 32}) {
				t.Errorf("usage chunk %+v, want 7 + 25 = 32", usage)
			}
		}
		// The role chunk, a chunk per token, the finish chunk, the usage chunk.
		wantChunks := 1 + want + 1
		if includeUsage {
			wantChunks++
		}
		if len(chunks) != wantChunks || text.String() != generated(want) || finish != wantFinish {
			t.Errorf("include_usage %v: %d chunks (want %d), finish %q (want %q), text %q", includeUsage, len(chunks), wantChunks, finish, wantFinish, text.String())
		}
	}
}

func TestEachTokenTakesTheTokenDelay(t *testing.T) {
	srv := httptest.NewServer(Handler(Options{CompletionTokens: 5, TokenDelay: 20 * time.Millisecond}))
	defer srv.Close()
	start := time.Now()
	resp := post(t, srv.URL, `{"messages": [{"role": "user", "content": "hi"}]}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("a 5-token answer at 20ms a token came in %v", d)
	}
	start = time.Now()
	resp = post(t, srv.URL, `{"stream": true, "messages": [{"role": "user", "content": "hi"}]}`)
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	_, _ = io.Copy(io.Discard, r)
	if all := time.Since(start); all < 100*time.Millisecond || all-first < 80*time.Millisecond {
		t.Errorf("a 5-token stream at 20ms a token: first chunk after %v, all after %v", first, all)
	}
}

func TestBadRequestsAreAnsweredAsOpenAIAnswersThem(t *testing.T) {
	srv := httptest.NewServer(Handler(Options{}))
	defer srv.Close()
	for _, tt := range []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", `{"messages": `},
		{"POST", "/v1/chat/completions", `{"messages": []}`},
		{"POST", "/v1/chat/completions", `{"max_tokens": 0, "messages": [{"role": "user", "content": "hi"}]}`},
		{"POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": 42}]}`},
		{"GET", "/v1/chat/completions", ``},
		{"POST", "/v1/embeddings", `{}`},
	} {
		req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode/100 != 4 || e.Error.Message == "" || e.Error.Type != "invalid_request_error" {
			t.Errorf("%s %s %s: status %d, error %+v (%v)", tt.method, tt.path, tt.body, resp.StatusCode, e.Error, err)
		}
	}
}
