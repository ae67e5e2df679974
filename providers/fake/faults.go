package fake

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// faultKeys documents the ParseFaults syntax, in order.
var faultKeys = []string{"create", "create-delay", "exec-fail", "exec-delay", "upload-fail", "close-fail", "close-delay"}

// ParseFaults parses the TALKOPS_TEST_FAKE_FAULTS syntax: comma-separated key=value pairs.
//
//	create=error        every Create fails (Faults.CreateErr = ErrInjected)
//	create-delay=2s     Faults.CreateDelay
//	exec-fail=3         the 3rd Exec fails (Faults.ExecFailAt)
//	exec-delay=500ms    Faults.ExecDelay
//	upload-fail=1       the 1st Upload fails (Faults.UploadFailAt)
//	close-fail=2        the first 2 Close calls fail (Faults.CloseFailures)
//	close-delay=1s      Faults.CloseDelay
//
// An empty string is no fault.
func ParseFaults(s string) (Faults, error) {
	var f Faults
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, val, ok := strings.Cut(item, "=")
		if !ok {
			return Faults{}, fmt.Errorf("fault %q: want key=value with key one of %s", item, strings.Join(faultKeys, ", "))
		}
		var err error
		switch key {
		case "create":
			if val != "error" {
				err = fmt.Errorf("want create=error")
			}
			f.CreateErr = ErrInjected
		case "create-delay":
			f.CreateDelay, err = parseDuration(val)
		case "exec-fail":
			f.ExecFailAt, err = parseCount(val)
		case "exec-delay":
			f.ExecDelay, err = parseDuration(val)
		case "upload-fail":
			f.UploadFailAt, err = parseCount(val)
		case "close-fail":
			f.CloseFailures, err = parseCount(val)
		case "close-delay":
			f.CloseDelay, err = parseDuration(val)
		default:
			return Faults{}, fmt.Errorf("unknown fault %q: valid keys are %s", key, strings.Join(faultKeys, ", "))
		}
		if err != nil {
			return Faults{}, fmt.Errorf("fault %q: %w", item, err)
		}
	}
	return f, nil
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want a non-negative duration such as 500ms or 2s")
	}
	return d, nil
}

func parseCount(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("want a positive whole number")
	}
	return n, nil
}
