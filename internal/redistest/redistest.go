// Package redistest starts private redis-server processes for tests.
//
// Every server listens on 127.0.0.1 on a free port chosen at start, keeps its
// files in the test's t.TempDir(), persists nothing, and is killed by
// t.Cleanup when the test ends. No helper ever connects to, or depends on, a
// Redis already running on the machine (such as one on 127.0.0.1:6379).
//
//	srv := redistest.Single(t)              // one server: srv.Addr()
//	cl := redistest.Cluster(t, 3)           // 3 masters, cluster_state:ok: cl.Addrs
//	sn := redistest.Sentinel(t)             // a primary and a sentinel: sn.SentinelAddrs, sn.MasterName
//
//	cl := redistest.ClusterWith(t, redistest.ClusterConfig{Replicas: 1, NodeTimeout: 2 * time.Second})
//	killed := cl.KillMaster(1)              // SIGKILL master 1
//	at, err := cl.WaitPromoted(1, 30*time.Second) // its replica is master and serves its slots
//	sn := redistest.SentinelWith(t, redistest.SentinelConfig{Replicas: 1, DownAfter: time.Second})
//	sn.KillPrimary(); sn.WaitMaster(sn.Replicas[0].Addr(), 30*time.Second) // or sn.Failover()
//
//	srv.Stop(); srv.Start()                 // an outage, then the same server back on the same port
//	srv.Freeze(); srv.Thaw()                // a server that accepts but never answers (SIGSTOP/SIGCONT)
//
// The helpers fail the test with a message saying what to install when
// redis-server (or redis-cli, for Cluster) is not on PATH; `make test`
// installs both. A Server is safe for concurrent use.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds how long a server may take to answer PING after start.
const startTimeout = 10 * time.Second

// Server is one redis-server process owned by a test.
type Server struct {
	t    testing.TB
	port int
	dir  string
	args []string // arguments after the config file

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	frozen  bool
	logPath string
}

// Single starts one standalone redis-server and returns it running.
func Single(t testing.TB) *Server {
	t.Helper()
	return start(t, "redis", "", nil)
}

// Addr is the server's "127.0.0.1:port". It stays the same across Stop and Start.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port is the server's TCP port.
func (s *Server) Port() int { return s.port }

// URL is the server's address as a redis:// URL for database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Stop kills the server (SIGKILL, as in a crash) and waits until it has
// exited and its port refuses connections. Stopping a stopped server does
// nothing.
func (s *Server) Stop() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.exited, s.frozen = nil, nil, false
}

// Start starts a stopped server again on the same port and waits until it
// answers PING. Its data is gone (nothing is persisted), except that a
// cluster node keeps its cluster configuration. Starting a running server
// does nothing.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	if err := s.launchLocked(); err != nil {
		s.t.Fatalf("redistest: restart redis-server on %s: %v", s.Addr(), err)
	}
}

// Restart is Stop then Start.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
}

// Freeze suspends the server process (SIGSTOP): connections are still
// accepted by the kernel but no command is ever answered, which is what a
// client sees of an overloaded or partitioned server. Thaw resumes it.
func (s *Server) Freeze() {
	s.t.Helper()
	s.signal(true)
}

// Thaw resumes a frozen server (SIGCONT).
func (s *Server) Thaw() {
	s.t.Helper()
	s.signal(false)
}

func (s *Server) signal(freeze bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.frozen == freeze {
		return
	}
	if err := signalProcess(s.cmd.Process, freeze); err != nil {
		s.t.Fatalf("redistest: signal redis-server on %s: %v", s.Addr(), err)
	}
	s.frozen = freeze
}

// Do sends one command to the server over a fresh connection and returns
// the reply: string for simple and bulk strings, int64, nil, []any for
// arrays, and an error for an error reply or a network failure. It is meant
// for set-up and checks in tests (FLUSHALL, CLUSTER KEYSLOT, INFO ...).
func (s *Server) Do(args ...string) (any, error) {
	return Do(context.Background(), s.Addr(), args...)
}

// Info returns the fields of the server's INFO section ("cpu",
// "commandstats", "all" ...) by name: used_cpu_user, cmdstat_evalsha ...
func (s *Server) Info(section string) (map[string]string, error) {
	reply, err := s.Do("INFO", section)
	if err != nil {
		return nil, err
	}
	text, _ := reply.(string)
	fields := map[string]string{}
	for _, line := range strings.Split(text, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(k, "#") {
			fields[k] = v
		}
	}
	return fields, nil
}

// Dir is the server's working directory (its log is redis.log there).
func (s *Server) Dir() string { return s.dir }

// start picks a free port and launches the server with the optional config
// file conf and extra options, retrying with another port if the chosen one
// was taken meanwhile.
func start(t testing.TB, name, conf string, extra func(port int) []string) *Server {
	t.Helper()
	bin := lookPath(t, "redis-server")
	dir := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: find a free port: %v", err)
		}
		s := &Server{t: t, port: port, dir: dir, logPath: filepath.Join(dir, name+".log")}
		s.args = []string{
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--dir", dir,
			"--logfile", s.logPath,
			"--save", "",
			"--appendonly", "no",
			"--daemonize", "no",
			"--databases", "16",
		}
		if extra != nil {
			s.args = append(s.args, extra(port)...)
		}
		head := []string{bin}
		if conf != "" {
			head = append(head, conf)
		}
		s.args = append(head, s.args...)
		s.mu.Lock()
		err = s.launchLocked()
		s.mu.Unlock()
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		lastErr = err
		if !strings.Contains(err.Error(), "in use") {
			break
		}
	}
	t.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

// launchLocked starts the process and waits for PING; s.mu is held.
func (s *Server) launchLocked() error {
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		select {
		case <-exited:
			s.cmd, s.exited = nil, nil
			return fmt.Errorf("redis-server on port %d exited at start: %s", s.port, s.logTail())
		default:
		}
		if r, err := Do(ctx, s.Addr(), "PING"); err == nil && r == "PONG" {
			return nil
		}
		select {
		case <-ctx.Done():
			s.stopLocked()
			return fmt.Errorf("redis-server on port %d did not answer PING within %s: %s", s.port, startTimeout, s.logTail())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// logTail returns the last lines of the server's log, for error messages.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil || len(b) == 0 {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// lookPath finds a program or fails the test saying how to get it.
func lookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("redistest: %s not found on PATH: install the Debian package redis-server (make test installs it: `make deps`)", name)
	}
	return p
}

// freePort asks the kernel for a free TCP port on 127.0.0.1. Another
// process may take it before the server binds; start retries then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Do sends one command to addr over a fresh connection and decodes the
// reply (see Server.Do). ctx bounds the whole exchange.
func Do(ctx context.Context, addr string, args ...string) (any, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(conn))
}

// replyError is an error reply from Redis.
type replyError string

func (e replyError) Error() string { return string(e) }

func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, replyError(line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, fmt.Errorf("bad bulk length %q", line)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, fmt.Errorf("bad array length %q", line)
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply %q", line)
}

// Running reports whether the server's process is running (started and
// not stopped; a frozen server is running).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// arg is the value of the server's command-line option name, or "".
func (s *Server) arg(name string) string {
	for i := 0; i+1 < len(s.args); i++ {
		if s.args[i] == name {
			return s.args[i+1]
		}
	}
	return ""
}
