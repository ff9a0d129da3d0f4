package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr puts a started program in a process group of its own, so that
// stopGroup stops whatever it starts (nginx's workers), and makes the kernel
// kill it if the test binary dies without running its cleanups.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// stopGroup kills every process of the group p leads.
func stopGroup(p *os.Process) { killGroup(p.Pid) }

// killGroup kills every process of group pgid.
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// groupMembers lists the live processes (zombies aside) of process group
// pgid as "pid (name)".
func groupMembers(pgid int) []string {
	var out []string
	for _, p := range processes() {
		if p.pgrp == pgid {
			out = append(out, strconv.Itoa(p.pid)+" "+p.name)
		}
	}
	return out
}

// children lists the live processes whose parent is pid.
func children(pid int) []int {
	var out []int
	for _, p := range processes() {
		if p.ppid == pid {
			out = append(out, p.pid)
		}
	}
	return out
}

// alive says whether process pid runs (a zombie does not).
func alive(pid int) bool {
	for _, p := range processes() {
		if p.pid == pid {
			return true
		}
	}
	return false
}

// process is what /proc/<pid>/stat says of a live process.
type process struct {
	pid, ppid, pgrp int
	name            string
}

// processes lists the live processes, zombies aside.
func processes() []process {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []process
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone meanwhile
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		// After the name: state, ppid, pgrp.
		fields := strings.Fields(s[end+1:])
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		pid, err1 := strconv.Atoi(strings.TrimSpace(s[:open]))
		ppid, err2 := strconv.Atoi(fields[1])
		pgrp, err3 := strconv.Atoi(fields[2])
		if err1 == nil && err2 == nil && err3 == nil {
			out = append(out, process{pid: pid, ppid: ppid, pgrp: pgrp, name: s[open : end+1]})
		}
	}
	return out
}
