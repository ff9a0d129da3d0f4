package livelimits

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Backend is where live changes are kept and how instances hear of them.
// Implementations are safe for concurrent use.
type Backend interface {
	// Read returns the hashes at keys; a missing key is absent from the map.
	Read(ctx context.Context, keys []string) (map[string]map[string]string, error)
	// Write replaces the hash at key with fields, to expire at expireAt
	// (zero: never), and notifies every instance.
	Write(ctx context.Context, key string, fields map[string]string, expireAt time.Time) error
	// Delete removes the hash at key and notifies every instance.
	Delete(ctx context.Context, key string) error
	// Subscribe calls onKey with the key of every change notified, and
	// onResync whenever notifications may have been missed (on every
	// (re)connection), until ctx is done. It blocks.
	Subscribe(ctx context.Context, onKey func(key string), onResync func())
}

// Redis keeps live changes in Redis hashes and notifies through pub/sub.
// It works on a single server, Sentinel and Cluster (any go-redis
// UniversalClient).
type Redis struct {
	// Client is the Redis client. Required.
	Client redis.UniversalClient
	// Channel is the pub/sub channel. Default "<prefix>:config" (see Channel).
	Channel string
	// RetryDelay is the pause before re-subscribing after an error. Default 500ms.
	RetryDelay time.Duration
}

// Read implements Backend with one pipelined HGETALL per key.
func (r *Redis) Read(ctx context.Context, keys []string) (map[string]map[string]string, error) {
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	_, err := r.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HGetAll(ctx, k)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("live limits: read: %w", err)
	}
	out := map[string]map[string]string{}
	for i, c := range cmds {
		if m := c.Val(); len(m) > 0 {
			out[keys[i]] = m
		}
	}
	return out, nil
}

// Write implements Backend: DEL, HSET and PEXPIREAT in one transaction,
// then PUBLISH.
func (r *Redis) Write(ctx context.Context, key string, fields map[string]string, expireAt time.Time) error {
	_, err := r.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		p.HSet(ctx, key, fields)
		if !expireAt.IsZero() {
			p.PExpireAt(ctx, key, expireAt)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("live limits: write %s: %w", key, err)
	}
	return r.publish(ctx, key)
}

// Delete implements Backend.
func (r *Redis) Delete(ctx context.Context, key string) error {
	if err := r.Client.Del(ctx, key).Err(); err != nil {
		return fmt.Errorf("live limits: delete %s: %w", key, err)
	}
	return r.publish(ctx, key)
}

func (r *Redis) publish(ctx context.Context, key string) error {
	if err := r.Client.Publish(ctx, r.Channel, key).Err(); err != nil {
		// The change is stored; the others see it at their next refresh.
		return fmt.Errorf("live limits: notify %s (stored; other instances see it at their next refresh): %w", key, err)
	}
	return nil
}

// Subscribe implements Backend. go-redis re-subscribes after a lost
// connection; each subscription confirmation triggers onResync, since
// messages published while disconnected are lost.
func (r *Redis) Subscribe(ctx context.Context, onKey func(string), onResync func()) {
	delay := r.RetryDelay
	if delay <= 0 {
		delay = 500 * time.Millisecond
	}
	ps := r.Client.Subscribe(ctx, r.Channel)
	defer ps.Close()
	for {
		msg, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				onResync()
			}
		case *redis.Message:
			onKey(m.Payload)
		}
	}
}

// Memory keeps live changes in this process: for the memory store, where
// there is one instance. Expiry is left to the Cache's timers.
type Memory struct {
	mu     sync.Mutex
	hashes map[string]map[string]string
	subs   []func(string)
}

// Read implements Backend.
func (m *Memory) Read(_ context.Context, keys []string) (map[string]map[string]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]map[string]string{}
	for _, k := range keys {
		if h, ok := m.hashes[k]; ok {
			out[k] = copyMap(h)
		}
	}
	return out, nil
}

// Write implements Backend.
func (m *Memory) Write(_ context.Context, key string, fields map[string]string, _ time.Time) error {
	if len(fields) == 0 {
		return errors.New("live limits: write: no fields")
	}
	m.mu.Lock()
	if m.hashes == nil {
		m.hashes = map[string]map[string]string{}
	}
	m.hashes[key] = copyMap(fields)
	subs := append([]func(string){}, m.subs...)
	m.mu.Unlock()
	for _, s := range subs {
		s(key)
	}
	return nil
}

// Delete implements Backend.
func (m *Memory) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	delete(m.hashes, key)
	subs := append([]func(string){}, m.subs...)
	m.mu.Unlock()
	for _, s := range subs {
		s(key)
	}
	return nil
}

// Subscribe implements Backend.
func (m *Memory) Subscribe(ctx context.Context, onKey func(string), onResync func()) {
	m.mu.Lock()
	m.subs = append(m.subs, onKey)
	m.mu.Unlock()
	onResync()
	<-ctx.Done()
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
