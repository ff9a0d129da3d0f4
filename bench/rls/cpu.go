package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
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
// allocations of the load generator and of the service.
type usage struct {
	service, redis       time.Duration
	mallocs              uint64
	serviceMallocs       float64
	hasService, hasRedis bool
	hasServiceMallocs    bool
}

// sample reads the CPU time of process pid (0: none) and of the redis-server at redisAddr
// ("": none), this process's allocations and those metricsURL reports ("": none).
func sample(pid int, redisAddr, metricsURL string) (usage, error) {
	u := usage{hasService: pid > 0, hasRedis: redisAddr != "", hasServiceMallocs: metricsURL != ""}
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
	if metricsURL != "" {
		n, err := mallocsOf(metricsURL)
		if err != nil {
			return u, err
		}
		u.serviceMallocs = n
	}
	return u, nil
}

// perCall renders what happened between before and u per call.
func (u usage) perCall(before usage, calls int64) string {
	if calls == 0 {
		return ""
	}
	n := float64(calls)
	s := fmt.Sprintf(" client_allocs/call=%.1f", float64(u.mallocs-before.mallocs)/n)
	if u.hasServiceMallocs {
		s += fmt.Sprintf(" service_allocs/call=%.1f", (u.serviceMallocs-before.serviceMallocs)/n)
	}
	if u.hasService {
		s += fmt.Sprintf(" service_cpu/call=%.1fµs", float64((u.service-before.service).Microseconds())/n)
	}
	if u.hasRedis {
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
	found := 0
	for _, line := range strings.Split(string(body), "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("redis cpu: %s: %w", k, err)
			}
			secs += f
			found++
		}
	}
	if found != 2 {
		return 0, fmt.Errorf("redis cpu: INFO cpu has %d of used_cpu_sys and used_cpu_user", found)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// mallocsOf reads go_memstats_mallocs_total from the Prometheus text at url.
func mallocsOf(url string) (float64, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, fmt.Errorf("service mallocs: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_mallocs_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("service mallocs: %w", err)
			}
			return f, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("service mallocs: %w", err)
	}
	return 0, fmt.Errorf("service mallocs: %s has no go_memstats_mallocs_total", url)
}
