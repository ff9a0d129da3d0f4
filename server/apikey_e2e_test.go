package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
)

// examples/llm-cost.yaml as it stands, with its pro key sent as the OpenAI SDKs send it,
// Authorization: Bearer: reserved and committed on plan_tier="pro", the free tier untouched.
func TestTheLLMCostExamplesProKeySentAsBearerIsChargedOnPro(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":12,"completion_tokens":300,"total_tokens":312}}`)
	}))
	t.Cleanup(up.Close)
	p := startServe(t, []string{"main"}, "--config", "../examples/llm-cost.yaml", "--upstream", up.URL)
	for range 2 {
		req, _ := http.NewRequest("POST", p.url("main", "/v1/chat/completions"), strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":800,"messages":[{"role":"user","content":"hi"}]}`))
		for k, v := range openAISDKHeaders("demo-pro-key") {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") != "1000000" {
			t.Fatalf("status %d, X-RateLimit-Limit %q: want 200 on pro's month of 1000000", resp.StatusCode, resp.Header.Get("X-RateLimit-Limit"))
		}
	}
	want := `rate_limit_cost_total{endpoint="POST /v1/chat/completions",phase="committed",plan_tier="pro"} 624`
	var metrics string
	if !eventually.Within(5*time.Second, func() bool {
		metrics = readBody(get(t, p.url("main", "/metrics"), nil))
		return strings.Contains(metrics, want)
	}) {
		t.Fatalf("no %s in\n%s", want, grepLines(metrics, "rate_limit_cost_total"))
	}
	if strings.Contains(metrics, `phase="committed",plan_tier="free"} 3`) || strings.Contains(metrics, `phase="reserved",plan_tier="free"} 1`) {
		t.Errorf("the free tier was charged:\n%s", grepLines(metrics, "rate_limit_cost_total"))
	}
}

// openAISDKHeaders are the headers openai-node sends with a chat completion for key.
func openAISDKHeaders(key string) map[string]string {
	return map[string]string{
		"Authorization": "Bearer " + key, "Content-Type": "application/json", "Accept": "application/json",
		"User-Agent": "OpenAI/JS 4.104.0", "X-Stainless-Lang": "js", "X-Stainless-Package-Version": "4.104.0",
		"X-Stainless-Os": "Linux", "X-Stainless-Arch": "x64", "X-Stainless-Runtime": "node",
		"X-Stainless-Runtime-Version": "v22.11.0", "X-Stainless-Retry-Count": "0",
	}
}
