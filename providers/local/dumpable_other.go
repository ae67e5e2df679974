//go:build !linux

package local

// MarkNonDumpable does nothing where there is no PR_SET_DUMPABLE.
func MarkNonDumpable() error { return nil }
