//go:build !unix

package workspace

// openFlags adds nothing where O_NONBLOCK does not exist.
const openFlags = 0
