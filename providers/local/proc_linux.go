package local

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// errNoProc is returned where /proc is needed and the system has none.
var errNoProc = errors.New("/proc is not available")

// procStat parses /proc/<pid>/stat: pid (comm) state ppid pgrp session ... with the
// start time as field 22. comm may hold spaces and ')', so fields are counted from the
// last ')'.
func procStat(pid int) (procInfo, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, err
	}
	return parseStat(pid, b)
}

func parseStat(pid int, b []byte) (procInfo, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: %d fields, want at least 22", pid, len(f)+2)
	}
	ppid, err0 := strconv.Atoi(string(f[1]))
	pgid, err1 := strconv.Atoi(string(f[2]))
	sid, err2 := strconv.Atoi(string(f[3]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err := errors.Join(err0, err1, err2, err3); err != nil {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	st := string(f[0])
	return procInfo{PID: pid, PPID: ppid, PGID: pgid, SID: sid, Start: start, Zombie: st == "Z" || st == "X"}, nil
}

// readProcs returns every process /proc lists (processes that vanish meanwhile are
// skipped).
func readProcs() ([]procInfo, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoProc, err)
	}
	var out []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := procStat(pid); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// bootID identifies the current boot; "" when unknown.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
