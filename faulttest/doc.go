// Package faulttest proves talkops's guarantees on the real binary: a fault matrix (a
// signal, a provider fault or an unwritable report directory at every stage, on every
// provider), secret canaries, fuzz targets for untrusted input the owning packages do not
// fuzz yet, and a concurrent load test. It holds tests only; see RELIABILITY.md.
package faulttest
