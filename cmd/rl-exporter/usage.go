package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rl-exporter/rl-exporter/admin"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
)

// usageTokenEnv holds the admin token of `usage --admin`, kept off the
// command line where ps would show it.
const usageTokenEnv = "RL_USAGE_TOKEN"

func runUsage(ctx context.Context, args []string, env environ, stdout, stderr io.Writer) int {
	fs := newFlagSet("usage", "--key KEY | --api-key KEY [flags]", "Prints what a client key has used of every limit that applies to it, from serve's\n"+
		httplimit.UsagePath+" (a decision API peer) or, with --admin, "+admin.UsagePath+" on the admin listener\n"+
		"with the admin token in "+usageTokenEnv+" (a read-only one is enough). --api-key asks with the\n"+
		"API key a client holds (sent in the request's body, never its URL), on the key's own tier.", stderr)
	key := fs.String("key", "", "the client key as the limiter names it: user:42, ip:10.0.0.1, apikey:<hash> (rl-exporter key)")
	rawKey := fs.String("api-key", "", apiKeyFlagHelp)
	base := fs.String("url", "http://"+config.DefaultListen, "serve's main listener, or its admin listener with --admin")
	tier := fs.String("plan-tier", "", "the plan tier to report (default: the key's own)")
	prefix := fs.String("prefix", httplimit.DecisionAPIPrefix, "serve's server.check_api.prefix, where its usage API is")
	useAdmin := fs.Bool("admin", false, "ask the admin listener, with the token in "+usageTokenEnv)
	asJSON := fs.Bool("json", false, "print the answer as JSON instead of a table")
	timeout := fs.Duration("timeout", 5*time.Second, "bound on the request")
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "rl-exporter usage: "+format+"\n", a...)
		return code
	}
	apiKey, err := "", error(nil)
	if *key == "" {
		apiKey, err = apiKeyFrom(ctx, *rawKey, flagSet(fs, "api-key"), env)
	}
	switch {
	case *key != "" && flagSet(fs, "api-key"):
		return fail(exitUsage, "--key and --api-key: give one")
	case err != nil:
		return fail(exitUsage, "%v", err)
	case *key == "" && apiKey == "":
		return fail(exitUsage, "--key: required, or --api-key (or %s) for an API key (run 'rl-exporter usage -h')", apiKeyEnv)
	}
	u, err := url.Parse(*base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail(exitUsage, "--url %q: want http://host:port or https://host:port", *base)
	}
	path, token := *prefix+strings.TrimPrefix(httplimit.UsagePath, httplimit.DecisionAPIPrefix), ""
	if *useAdmin {
		path, token = admin.UsagePath, env.Get(usageTokenEnv)
		if token == "" {
			return fail(exitUsage, "--admin: set %s to an admin token (read-only is enough)", usageTokenEnv)
		}
	}
	if *key != "" && !strings.HasPrefix(*key, "user:") && !strings.HasPrefix(*key, "ip:") && !strings.HasPrefix(*key, "apikey:") {
		// A decision API caller's own key is any string, but a raw API key here names
		// another budget than the proxy's: say so rather than print its zeros in silence.
		fmt.Fprintf(stderr, "rl-exporter usage: note: --key %q is none of the proxy's key forms (user:<id>, ip:<address>, apikey:<hash>): for the API key a client sends, use --api-key\n", *key)
	}
	u = u.JoinPath(path)
	var reqBody []byte
	if apiKey != "" {
		reqBody, _ = json.Marshal(httplimit.UsageRequest{APIKey: apiKey, PlanTier: *tier}) // strings: cannot fail
	} else {
		q := url.Values{"key": {*key}}
		if *tier != "" {
			q.Set("plan_tier", *tier)
		}
		u.RawQuery = q.Encode()
	}
	body, err := fetchUsage(ctx, u.String(), token, reqBody, *timeout)
	if err != nil {
		return fail(exitFailure, "%v", err)
	}
	if *asJSON {
		_, _ = stdout.Write(body)
		return exitOK
	}
	var rep httplimit.UsageReport
	if err := json.Unmarshal(body, &rep); err != nil {
		return fail(exitFailure, "%s: the answer is not a usage report: %v", u.Redacted(), err)
	}
	printUsage(stdout, rep)
	return exitOK
}

// fetchUsage GETs url, or POSTs reqBody to it when there is one, and returns the body of a
// 200; any other answer is an error carrying the status and the API's message.
func fetchUsage(ctx context.Context, url, token string, reqBody []byte, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	method, send := http.MethodGet, io.Reader(nil)
	if reqBody != nil {
		method, send = http.MethodPost, bytes.NewReader(reqBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, send)
	if err != nil {
		return nil, err
	}
	if reqBody != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error, Message string }
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Message != "" {
			msg = e.Error + ": " + e.Message
		}
		return nil, fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, msg)
	}
	return body, nil
}

// printUsage writes rep as a table, a row per limit.
func printUsage(w io.Writer, rep httplimit.UsageReport) {
	fmt.Fprintf(w, "key %s, plan tier %s, at %s\n", rep.Key, rep.PlanTier, rep.At.UTC().Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASS\tENDPOINT\tALGORITHM\tQUOTA\tUSED\tREMAINING\tOPEN RESERVATIONS\tRESET\tEXHAUSTED AT")
	for _, l := range rep.Limits {
		exhausted := "-"
		if l.ExhaustedAt != nil {
			exhausted = l.ExhaustedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", l.Class, l.Endpoint, l.Algorithm,
			l.Quota, l.Used, l.Remaining, l.OpenReservations, l.Reset.UTC().Format(time.RFC3339), exhausted)
	}
	_ = tw.Flush()
}
