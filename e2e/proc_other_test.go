//go:build !linux

package e2e

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// stopGroup kills p: without process groups, only p itself.
func stopGroup(p *os.Process) { _ = p.Kill() }

// killGroup cannot reach a group here: stopGroup stopped its leader.
func killGroup(int) {}

// groupMembers cannot list a group's processes here.
func groupMembers(int) []string { return nil }

// children cannot list a process's children here.
func children(int) []int { return nil }

// alive cannot tell here.
func alive(int) bool { return false }
