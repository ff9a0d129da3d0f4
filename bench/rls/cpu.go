package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTick is the kernel's USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux
// architecture Go supports.
const clockTick = 100

// usage is a sample of the CPU time used so far by the service and redis-server, and of the
// load generator's own allocations.
type usage struct {
	service, redis time.Duration
	mallocs        uint64
}

// sample reads the CPU time of process pid (0: none) and of the redis-server at redisAddr
// ("": none), and this process's allocations.
func sample(pid int, redisAddr string) (usage, error) {
	var u usage
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u.mallocs = ms.Mallocs
	if pid > 0 {
		t, err := processCPU(pid)
		if err != nil {
			return u, err
		}
		u.service = t
	}
	if redisAddr != "" {
		t, err := redisCPU(redisAddr)
		if err != nil {
			return u, err
		}
		u.redis = t
	}
	return u, nil
}

// perCall renders what happened between before and u per call.
func (u usage) perCall(before usage, pid int, redisAddr string, calls int64) string {
	if calls == 0 {
		return ""
	}
	n := float64(calls)
	s := fmt.Sprintf(" client_allocs/call=%.1f", float64(u.mallocs-before.mallocs)/n)
	if pid > 0 {
		s += fmt.Sprintf(" service_cpu/call=%.1fµs", float64((u.service-before.service).Microseconds())/n)
	}
	if redisAddr != "" {
		s += fmt.Sprintf(" redis_cpu/call=%.1fµs", float64((u.redis-before.redis).Microseconds())/n)
	}
	return s
}

// processCPU is utime+stime of pid, from /proc/PID/stat.
func processCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("service cpu: %w", err)
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("service cpu: /proc/%d/stat: %d fields after the name", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] { // utime, stime: fields 14 and 15 of stat
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("service cpu: /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTick, nil
}

// redisCPU is used_cpu_sys+used_cpu_user of INFO cpu.
func redisCPU(addr string) (time.Duration, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return 0, fmt.Errorf("redis cpu: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("INFO cpu\r\n")); err != nil {
		return 0, fmt.Errorf("redis cpu: %w", err)
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("redis cpu: INFO answered %q: %v", head, err)
	}
	size, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		return 0, fmt.Errorf("redis cpu: %w", err)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, fmt.Errorf("redis cpu: %w", err)
	}
	var secs float64
	for _, line := range strings.Split(string(body), "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("redis cpu: %s: %w", k, err)
			}
			secs += f
		}
	}
	return time.Duration(secs * float64(time.Second)), nil
}
