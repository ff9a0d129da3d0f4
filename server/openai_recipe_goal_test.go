//go:build !race

package server_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/server"
)

// The OpenAI-style recipe's goal run, its minute scaled down tenfold: 12 s stand for the two
// minutes, 6 s for each limit's minute; the organisation's month keeps its calendar, its quota
// scaled down to what the run can spend. Every total is the same at any scale (the rates per
// second grow as the run shrinks), so `go test -run TestGoalOpenAIStyleRecipe ./server/ -args
// -recipe-scale 1` runs the two real minutes a store, which make test cannot afford.
var recipeScale = flag.Int64("recipe-scale", 10, "the OpenAI-style recipe's goal run: how many times shorter than two minutes, each limit's minute shortened alike")

const (
	recipeOrgCap = 1_100_000 // tokens; the recipe's 50,000,000 a month cannot bind in a test
	recipeOrg    = "acme"
	maxPrompt    = 60 // an answer's prompt tokens are 20 to 60
	heavyTokens  = 4000
	chattyTokens = 20
)

// llmUpstream answers POST /v1/chat/completions as an LLM API does: usage.total_tokens is a
// prompt of 20 to 60 tokens plus a completion of max_tokens/2 to max_tokens, known only once
// it answers. It counts, per API key and for the organisation, the requests and tokens served.
type llmUpstream struct {
	*httptest.Server
	mu       sync.Mutex
	rng      *rand.Rand
	tokens   map[string]int64
	requests map[string]int64
	org      atomic.Int64
}

func newLLMUpstream(t *testing.T) *llmUpstream {
	u := &llmUpstream{rng: rand.New(rand.NewPCG(7, 11)), tokens: map[string]int64{}, requests: map[string]int64{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MaxTokens int64 `json:"max_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.MaxTokens < 2 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		u.mu.Lock()
		prompt := 20 + u.rng.Int64N(maxPrompt-20+1)
		completion := req.MaxTokens/2 + u.rng.Int64N(req.MaxTokens-req.MaxTokens/2+1)
		u.tokens[key] += prompt + completion
		u.requests[key]++
		u.mu.Unlock()
		u.org.Add(prompt + completion)
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"choices":[{"message":{"content":"..."}}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
			prompt, completion, prompt+completion)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *llmUpstream) served(key string) (requests, tokens int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.requests[key], u.tokens[key]
}

// recipeProxy serves examples/openai-style.yaml on store in front of upstream, with the API
// keys given to tier1 and its limits scaled (recipeScale, recipeOrgCap); it returns the proxy's
// address, the middleware and tier1's limits as served.
func recipeProxy(t *testing.T, upstream string, store limiter.Store, keys []string) (string, *httplimit.Middleware, map[string]limiter.Limit) {
	t.Helper()
	cfg, err := config.Load("../examples/openai-style.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tiers.APIKeys["tier1"] = keys
	pc, err := cfg.PolicyConfig(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A loaded machine's slow store call fails closed, so that it is never an admission uncharged.
	pc.FailPolicy, pc.Timeout = limiter.FailClosed, 2*time.Second
	lims := map[string]limiter.Limit{}
	for i, c := range pc.Classes {
		list := c.TierLimits["tier1"]
		if c.Name != "chat" || len(list) != 4 {
			continue
		}
		list = slices.Clone(list)
		for j := range list {
			switch l := &list[j].Limit; list[j].Name {
			case "rpm", "tpm":
				l.Period /= time.Duration(*recipeScale)
			case "monthly":
				l.Rate = recipeOrgCap
			}
			lims[list[j].Name] = list[j].Limit
		}
		pc.Classes[i].TierLimits = map[string][]httplimit.TierLimit{"tier1": list}
	}
	if len(lims) != 4 {
		t.Fatalf("the recipe's chat/tier1 list: %v", lims)
	}
	p, err := httplimit.NewPolicy(pc)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	up, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Listen: "127.0.0.1:0", Upstream: up, Middleware: mw})
	if err != nil {
		t.Fatal(err)
	}
	return runServer(t, srv), mw, lims
}

// refusal is one 429: the key refused, the limits it named and what the upstream had served
// the organisation when it came.
type refusal struct {
	key       string
	refusedBy []string
	orgServed int64
	after     time.Duration // since the run began
}

// driveRecipe sends chat completions from 64 clients, 16 on each key, until the run ends:
// keys[0] and keys[1] ask for 20 tokens (their requests per minute bind), keys[2] and keys[3]
// for 4,000 (their tokens per minute bind). It returns the refusals and the run's length.
func driveRecipe(t *testing.T, base string, up *llmUpstream, keys []string) ([]refusal, time.Duration) {
	var mu sync.Mutex
	var refusals []refusal
	start := time.Now()
	end := start.Add(2 * time.Minute / time.Duration(*recipeScale))
	var wg sync.WaitGroup
	for g := range 64 {
		key := keys[g%len(keys)]
		body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":%d}`, chattyTokens)
		if g%len(keys) >= 2 {
			body = fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":%d}`, heavyTokens)
		}
		wg.Go(func() {
			c := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
			defer c.CloseIdleConnections()
			for time.Now().Before(end) {
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("X-Org-ID", recipeOrg)
				resp, err := c.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
				case http.StatusTooManyRequests:
					var rb httplimit.RejectedBody
					if err := json.Unmarshal(b, &rb); err != nil {
						t.Errorf("429 body %q: %v", b, err)
						return
					}
					mu.Lock()
					refusals = append(refusals, refusal{key, rb.RefusedBy, up.org.Load(), time.Since(start)})
					mu.Unlock()
				default:
					t.Errorf("status %d: %s", resp.StatusCode, b)
					return
				}
			}
		})
	}
	wg.Wait()
	return refusals, time.Since(start)
}

// TestGoalOpenAIStyleRecipeHoldsEveryLimitThroughTheProxy: the OpenAI-style recipe
// (examples/openai-style.yaml) through the proxy in front of an LLM-like upstream, 64 clients
// of one organisation on four API keys for the run (2 minutes scaled down tenfold, each minute
// 6 s), on the memory store and a Redis server. Every bound is on what the upstream served,
// each answer's tokens known only once it answered:
//   - rpm (sliding_window, 500 a minute) per key: at most 500 × (run/minute + 1) requests;
//   - tpm (token_bucket, 200,000 a minute) per key: at most burst + 200,000 × run/minute tokens,
//     plus the charges past the estimate of the requests in flight (16 clients × 60 prompt
//     tokens), which never refuse;
//   - the organisation's month (scaled to 1,100,000 tokens, spent late in the run): at most the budget plus the 64
//     clients' charges past their estimates, and spent to within the largest estimate.
//
// Each refusal names the limit that binds for its key (rpm for the small requests, tpm for the
// large), or the organisation's monthly, and names monthly only once the organisation had been
// served at least the budget less what the 64 clients can hold in flight. Once settled, each
// key's daily limit counts exactly the tokens the upstream reported, and nothing is left open.
func TestGoalOpenAIStyleRecipeHoldsEveryLimitThroughTheProxy(t *testing.T) {
	if *recipeScale < 1 {
		t.Fatalf("-recipe-scale %d: want 1 (two real minutes) or more", *recipeScale)
	}
	stores := map[string]func(t *testing.T) limiter.Store{
		"memory": func(*testing.T) limiter.Store { return limiter.NewMemoryStore(limiter.MemoryConfig{}) },
		"redis": func(t *testing.T) limiter.Store {
			srv := redistest.Single(t)
			client, err := redisstore.ClientConfig{URL: srv.URL()}.NewClient()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = client.Close() })
			rs, err := redisstore.New(client, redisstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rs.Close(context.Background()) }) // before the client: its batch senders use it
			return rs
		},
	}
	for _, name := range []string{"memory", "redis"} {
		t.Run(name, func(t *testing.T) {
			keys := []string{"chatty-0", "chatty-1", "heavy-0", "heavy-1"}
			up := newLLMUpstream(t)
			base, mw, lims := recipeProxy(t, up.URL, stores[name](t), keys)
			refusals, run := driveRecipe(t, base, up, keys)
			periods := float64(run) / float64(lims["rpm"].Period)
			checkRecipeBounds(t, up, keys, lims, periods)
			checkRecipeRefusals(t, refusals, keys)
			checkRecipeSettled(t, mw, up, keys)
		})
	}
}

// checkRecipeBounds checks each limit's bound on what the upstream served over periods
// minutes of the run (scaled).
func checkRecipeBounds(t *testing.T, up *llmUpstream, keys []string, lims map[string]limiter.Limit, periods float64) {
	t.Helper()
	rpm, tpm := lims["rpm"], lims["tpm"]
	rpmBound := int64(float64(rpm.Rate) * (periods + 1))
	tpmBound := tpm.Quota() + int64(float64(tpm.Rate)*periods) + 16*maxPrompt
	for i, key := range keys {
		reqs, tokens := up.served(key)
		t.Logf("%s: %d requests (rpm bound %d, %.2f of it), %d tokens (tpm bound %d, %.2f of it) in %.2f minutes",
			key, reqs, rpmBound, float64(reqs)/float64(rpmBound), tokens, tpmBound, float64(tokens)/float64(tpmBound), periods)
		if reqs > rpmBound {
			t.Errorf("%s: %d requests served, over rpm's bound of %d", key, reqs, rpmBound)
		}
		if tokens > tpmBound {
			t.Errorf("%s: %d tokens served, over tpm's bound of %d", key, tokens, tpmBound)
		}
		if i < 2 && reqs < rpm.Rate {
			t.Errorf("%s: %d requests served, not even one minute's %d: rpm never bound", key, reqs, rpm.Rate)
		}
	}
	org, orgBound := up.org.Load(), int64(recipeOrgCap+64*maxPrompt)
	t.Logf("the organisation: %d tokens of its %d (bound %d): %.4f of the budget", org, recipeOrgCap, orgBound, float64(org)/recipeOrgCap)
	if org > orgBound || org < recipeOrgCap-heavyTokens {
		t.Errorf("the organisation was served %d tokens: want between %d and %d", org, recipeOrgCap-heavyTokens, orgBound)
	}
}

// checkRecipeRefusals checks that each refusal names the limit that binds for its key, or the
// organisation's monthly once its budget was (nearly) spent.
func checkRecipeRefusals(t *testing.T, refusals []refusal, keys []string) {
	t.Helper()
	own := map[string]string{keys[0]: "rpm", keys[1]: "rpm", keys[2]: "tpm", keys[3]: "tpm"}
	named := map[string]int{}
	var first time.Duration
	// A refusal by monthly needs the store's count within an estimate of the budget: what it
	// holds is what the upstream served plus at most 64 estimates in flight.
	earliest := int64(recipeOrgCap - heavyTokens - 64*heavyTokens)
	for _, r := range refusals {
		if len(r.refusedBy) == 0 {
			t.Fatalf("%s: a refusal names no limit", r.key)
		}
		for _, n := range r.refusedBy {
			named[r.key+" "+n]++
			switch {
			case n == own[r.key]:
			case n == "monthly" && r.orgServed >= earliest:
				if first == 0 || r.after < first {
					first = r.after
				}
			default:
				t.Fatalf("%s refused by %v when the organisation had been served %d tokens (monthly may refuse from %d)",
					r.key, r.refusedBy, r.orgServed, earliest)
			}
		}
	}
	t.Logf("refusals by key and limit: %v; the first by monthly %.1f s into the run", named, first.Seconds())
	for _, key := range keys {
		if named[key+" "+own[key]] == 0 {
			t.Errorf("%s: no refusal by %s, the limit that binds for it", key, own[key])
		}
	}
	if named[keys[2]+" monthly"]+named[keys[3]+" monthly"] == 0 {
		t.Error("no refusal by the organisation's monthly")
	}
}

// checkRecipeSettled checks, once every settle landed, that each key's daily limit counts the
// tokens the upstream reported for it and that no reservation is left open.
func checkRecipeSettled(t *testing.T, mw *httplimit.Middleware, up *llmUpstream, keys []string) {
	t.Helper()
	hdr := http.Header{"X-Org-Id": {recipeOrg}}
	for _, key := range keys {
		_, tokens := up.served(key)
		var daily, open int64
		if !eventually.Within(10*time.Second, func() bool {
			rep, err := mw.UsageScoped(context.Background(), httplimit.APIKeyKey(key), "", hdr, nil)
			if err != nil {
				t.Logf("usage of %s: %v", key, err) // a slow store read: asked again
				return false
			}
			daily, open = -1, 0
			for _, l := range rep.Limits {
				for _, p := range l.Limits {
					open += p.OpenReservations
					if l.Class == "chat" && l.Endpoint == "POST /v1/chat/completions" && p.Name == "daily" {
						daily = p.Used
					}
				}
			}
			return daily == tokens && open == 0
		}) {
			t.Errorf("%s: daily counts %d tokens, %d reservations open; the upstream served %d tokens", key, daily, open, tokens)
		}
	}
}
