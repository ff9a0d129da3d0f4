// Command rls-load drives any Envoy rate limit service (rl-exporter serve's
// gRPC listener, envoyproxy/ratelimit) with the same load, so that both can
// be measured alike: a number of ShouldRateLimit calls in flight at once
// over one gRPC connection, as from a fleet of Envoys sharing one service,
// each call one descriptor with one entry whose value cycles over a number
// of users.
//
//	go run . -addr 127.0.0.1:8081 -domain bench -key user -streams 64 -duration 10s
//
// It prints the calls per second, and the calls that failed or were
// answered OVER_LIMIT (a run meant to measure admitted calls wants both 0),
// its own allocations per call (the client's share of gRPC's) and, with
// -pid and -redis, the CPU time per call of the service's process and of
// redis-server over the measured part: on a busy machine a steadier figure
// than the calls per second.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rls-load:", err)
		os.Exit(1)
	}
}

// result is one run's counts.
type result struct {
	calls, failed, over int64
	elapsed             time.Duration
	firstErr            error // the first failed call's error, nil when none
}

func (r result) String() string {
	s := fmt.Sprintf("calls=%d calls/s=%.0f failed=%d over_limit=%d elapsed=%s",
		r.calls, float64(r.calls)/r.elapsed.Seconds(), r.failed, r.over, r.elapsed.Round(time.Millisecond))
	if r.firstErr != nil {
		s += fmt.Sprintf(" first_error=%q", r.firstErr.Error())
	}
	return s
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("rls-load", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8081", "host:port of the rate limit service (plaintext gRPC)")
	domain := fs.String("domain", "bench", "the request's domain")
	key := fs.String("key", "user", "the descriptor entry's key")
	users := fs.Int("users", 1000, "distinct entry values, cycled")
	streams := fs.Int("streams", 64, "calls in flight at once over the one connection")
	duration := fs.Duration("duration", 10*time.Second, "how long to measure")
	warmup := fs.Duration("warmup", 2*time.Second, "load before measuring, not counted")
	pid := fs.Int("pid", 0, "the service's process, whose CPU time per call is reported (Linux)")
	redisAddr := fs.String("redis", "", "host:port of the redis-server whose CPU time per call is reported")
	metricsURL := fs.String("metrics", "", "the service's Prometheus metrics, whose go_memstats_mallocs_total gives its allocations per call")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *streams < 1 || *users < 1 || *duration <= 0 {
		return errors.New("-streams, -users and -duration must be positive")
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect %s: %w", *addr, err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	reqs := make([]*rlsv3.RateLimitRequest, *users)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: *domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: *key, Value: "u" + strconv.Itoa(i)}},
		}}}
	}
	// One call first: a service that does not answer fails the run at once.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = client.ShouldRateLimit(cctx, reqs[0])
	cancel()
	if err != nil {
		return fmt.Errorf("first call to %s: %w", *addr, err)
	}
	if *warmup > 0 {
		load(ctx, client, reqs, *streams, *warmup)
	}
	before, err := sample(*pid, *redisAddr, *metricsURL)
	if err != nil {
		return err
	}
	res := load(ctx, client, reqs, *streams, *duration)
	after, err := sample(*pid, *redisAddr, *metricsURL)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "addr=%s streams=%d users=%d %s%s\n", *addr, *streams, *users, res, after.perCall(before, res.calls))
	return nil
}

// load keeps streams calls in flight for d and counts them.
func load(ctx context.Context, client rlsv3.RateLimitServiceClient, reqs []*rlsv3.RateLimitRequest, streams int, d time.Duration) result {
	deadline := time.Now().Add(d)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var next, calls, failed, over atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				resp, err := client.ShouldRateLimit(ctx, reqs[next.Add(1)%int64(len(reqs))])
				switch {
				case ctx.Err() != nil || !time.Now().Before(deadline):
					// The end of the run cut this call short (gRPC may see the deadline
					// before the context's timer fires): not counted.
					return
				case err != nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				case resp.GetOverallCode() != rlsv3.RateLimitResponse_OK:
					over.Add(1)
				}
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	res := result{calls: calls.Load(), failed: failed.Load(), over: over.Load(), elapsed: time.Since(start)}
	if e := firstErr.Load(); e != nil {
		res.firstErr = *e
	}
	return res
}
