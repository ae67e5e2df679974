//go:build !linux

package local

import "errors"

// errNoProc is returned where /proc is needed and the system has none.
var errNoProc = errors.New("process groups cannot be verified on this system (no Linux /proc)")

func procStat(int) (procInfo, error) { return procInfo{}, errNoProc }

func readProcs() ([]procInfo, error) { return nil, errNoProc }

func bootID() string { return "" }
