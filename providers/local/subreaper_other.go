//go:build !linux

package local

// BecomeSubreaper does nothing where there is no PR_SET_CHILD_SUBREAPER: detached
// processes that clear their environment outlive the sandbox there.
func BecomeSubreaper() error { return nil }

func registerOpen(*sandbox)   {}
func unregisterOpen(*sandbox) {}
func registerDirect(int)      {}
func unregisterDirect(int)    {}
func killOrphans() error      { return nil }

var starting fakeRWMutex

type fakeRWMutex struct{}

func (fakeRWMutex) RLock()   {}
func (fakeRWMutex) RUnlock() {}
