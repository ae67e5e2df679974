package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/talkops/talkops/internal/safename"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/state"
)

// States List reports.
const (
	StateRunning    = "running"    // a recorded process group still has a live member
	StateIdle       = "idle"       // no command of the sandbox is running
	StateUnreadable = "unreadable" // the record cannot be read; Delete still removes it
)

// reapWait bounds how long Delete waits for killed process groups to disappear.
const reapWait = 5 * time.Second

// DefaultStateDir is the state directory the CLI gives the provider:
// state.ProviderDir(getenv, "local"), next to the talkops sandbox ledger.
func DefaultStateDir(getenv func(string) string) string {
	return state.ProviderDir(getenv, Name)
}

// sandboxRecord is <state>/<id>/sandbox.json, written by Create and removed by Close.
type sandboxRecord struct {
	ID        string            `json:"id"`
	RunID     string            `json:"run_id,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	WorkDir   string            `json:"work_dir"`
	OwnerPID  int               `json:"owner_pid"`
	OwnerHost string            `json:"owner_host,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

const sandboxFile = "sandbox.json"

// groupRecord is <state>/<id>/pgid-<N>.json: one process group of the sandbox that may
// still have members. Start, SID and BootID identify the group, so that a process group
// id the kernel handed to someone else after ours emptied is never signalled.
type groupRecord struct {
	PGID int `json:"pgid"`
	// Start is the group leader's start time in clock ticks after boot
	// (/proc/<pid>/stat field 22); 0 when it could not be read.
	Start uint64 `json:"start"`
	// SID is the session of the group (every member of a group shares its session).
	SID int `json:"sid"`
	// BootID is /proc/sys/kernel/random/boot_id: start times mean nothing across boots.
	BootID string `json:"boot_id,omitempty"`
}

func groupFile(pgid int) string { return "pgid-" + strconv.Itoa(pgid) + ".json" }

// validID reports whether id is a sandbox id this provider gives out: "local-" and a plain
// name of at most 81 characters.
func validID(id string) bool {
	name, ok := strings.CutPrefix(id, "local-")
	return ok && safename.Valid(name, 81)
}

// claimDir creates the sandbox's record directory under stateDir, adding a random suffix
// to id when another sandbox (in this or another process) already holds it. It returns
// the id the sandbox gets.
func claimDir(stateDir, id string) (string, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", err
	}
	try := id
	for range 8 {
		err := os.Mkdir(filepath.Join(stateDir, try), 0o700)
		if err == nil {
			return try, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		try = id + "-" + hex.EncodeToString(b)
	}
	return "", fmt.Errorf("no free sandbox id for %s in %s", id, stateDir)
}

// writeJSON writes v to path atomically (a temporary file in the same directory renamed
// into place), so a reader never sees half a record even if talkops is killed mid-write.
func writeJSON(path string, v any) (err error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(append(b, '\n')); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readGroups returns the group records in a sandbox's record directory. Unreadable
// records are returned as errors and skipped.
func readGroups(dir string) ([]groupRecord, []error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{err}
	}
	var out []groupRecord
	var errs []error
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "pgid-") || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var g groupRecord
		if err := readJSON(filepath.Join(dir, e.Name()), &g); err != nil {
			errs = append(errs, err)
			continue
		}
		if g.PGID <= 1 {
			errs = append(errs, fmt.Errorf("%s: invalid process group id %d", e.Name(), g.PGID))
			continue
		}
		out = append(out, g)
	}
	return out, errs
}

// procInfo is what /proc says about one process.
type procInfo struct {
	PID, PPID int
	PGID, SID int
	Start     uint64
	Zombie    bool
}

// ownedMembers returns the running members of g's process group when the group is still
// the one recorded, and nil otherwise. procs are the processes of the host; boot is the
// current boot id ("" when unknown).
//
// The group is ours when its leader (pid == pgid) still runs with the recorded start
// time. With the leader gone the kernel cannot hand the pgid to a new process while any
// member remains, so the members are ours when they are in the recorded session and
// started no earlier than the leader. A group recorded in another boot is never ours.
func ownedMembers(g groupRecord, procs []procInfo, boot string) []procInfo {
	if g.BootID != "" && boot != "" && g.BootID != boot {
		return nil
	}
	var members []procInfo
	leader := false
	for _, p := range procs {
		if p.PGID != g.PGID {
			continue
		}
		if p.PID == g.PGID {
			if p.Start != g.Start {
				return nil
			}
			leader = true
		}
		if !p.Zombie {
			members = append(members, p)
		}
	}
	if !leader {
		for _, m := range members {
			if m.SID != g.SID || m.Start < g.Start {
				return nil
			}
		}
	}
	return members
}

// recordGroup writes the record of a process group this sandbox just started. It is
// called with s.mu held and before the command is waited for, so /proc still has the
// leader (as a zombie at worst).
func (s *sandbox) recordGroup(pgid int) error {
	if s.stateDir == "" {
		return nil
	}
	g := groupRecord{PGID: pgid, BootID: bootID()}
	if p, err := procStat(pgid); err == nil {
		g.Start, g.SID = p.Start, p.SID
	} else if !errors.Is(err, errNoProc) {
		return fmt.Errorf("read the command's process: %w", err)
	}
	if err := writeJSON(filepath.Join(s.stateDir, groupFile(pgid)), g); err != nil {
		return fmt.Errorf("record process group %d: %w", pgid, err)
	}
	return nil
}

// forgetGroup removes a group's record once it has no member left.
func (s *sandbox) forgetGroup(pgid int) {
	if s.stateDir != "" {
		_ = os.Remove(filepath.Join(s.stateDir, groupFile(pgid)))
	}
}

var _ providers.Lister = (*Provider)(nil)

// List returns the sandboxes recorded in Options.StateDir: those open in a talkops
// process, and those a killed process left behind, with state "running" while one of
// their recorded process groups has a live member. Each carries providers.LabelOwnerPID and
// providers.LabelOwnerHost. Without a StateDir nothing is recorded and List returns nothing.
func (p *Provider) List(ctx context.Context) ([]providers.Info, error) {
	if p.opts.StateDir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(p.opts.StateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("local: list: %w", err)
	}
	procs, procErr := readProcs()
	boot := bootID()
	var out []providers.Info
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("local: list: %w", err)
		}
		if !e.IsDir() || !validID(e.Name()) {
			continue
		}
		dir := filepath.Join(p.opts.StateDir, e.Name())
		info := providers.Info{Provider: Name, ID: e.Name(), State: StateUnreadable}
		var rec sandboxRecord
		if err := readJSON(filepath.Join(dir, sandboxFile), &rec); err != nil {
			if fi, err := e.Info(); err == nil {
				info.CreatedAt = fi.ModTime().UTC()
			}
			out = append(out, info)
			continue
		}
		info.RunID, info.CreatedAt = rec.RunID, rec.CreatedAt
		info.Labels = maps.Clone(rec.Labels)
		if info.Labels == nil {
			info.Labels = map[string]string{}
		}
		info.Labels[providers.LabelOwnerPID] = strconv.Itoa(rec.OwnerPID)
		if rec.OwnerHost != "" {
			info.Labels[providers.LabelOwnerHost] = rec.OwnerHost
		}
		if t, err := time.Parse(time.RFC3339, rec.Labels[providers.LabelExpiresAt]); err == nil {
			info.ExpiresAt = t
		}
		info.State = StateIdle
		groups, _ := readGroups(dir)
		for _, g := range groups {
			if procErr != nil || len(ownedMembers(g, procs, boot)) > 0 {
				// Without /proc a recorded group may well be running.
				info.State = StateRunning
				break
			}
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b providers.Info) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// Delete kills every process in the sandbox's recorded process groups that is still the
// one recorded (see the group check on ownedMembers), waits for them to die, and removes
// the record. A sandbox open in this process is closed instead. An unknown or already
// deleted id is not an error.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if !validID(id) {
		return fmt.Errorf("local: delete %q: not a local sandbox id (want local-<run id>)", id)
	}
	p.mu.Lock()
	var own *sandbox
	for sb := range p.sandboxes {
		if sb.id == id && sb.stateDir != "" {
			own = sb
		}
	}
	p.mu.Unlock()
	if own != nil {
		return own.Close(ctx)
	}
	if p.opts.StateDir == "" {
		return nil
	}
	dir := filepath.Join(p.opts.StateDir, id)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := reapGroups(ctx, dir); err != nil {
		return fmt.Errorf("local: delete %s: %w", id, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("local: delete %s: %w", id, err)
	}
	return nil
}

// reapGroups SIGKILLs the recorded process groups in dir that are still ours and waits
// (bounded by ctx and reapWait) until none of their members runs.
func reapGroups(ctx context.Context, dir string) error {
	// A record that cannot be read cannot be verified, so its group is not signalled;
	// Delete removes it with the rest.
	groups, _ := readGroups(dir)
	boot := bootID()
	tokens := readTokens(dir, boot)
	if len(groups) == 0 && len(tokens) == 0 {
		return nil
	}
	err := killUntilGone(ctx, func(procs []procInfo) []int {
		var left []int
		for _, g := range groups {
			members := ownedMembers(g, procs, boot)
			if len(members) == 0 {
				continue
			}
			killGroup(g.PGID)
			for _, m := range members {
				left = append(left, m.PID)
			}
		}
		for _, pid := range marked(procs, tokens) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			left = append(left, pid)
		}
		return left
	})
	if errors.Is(err, errNoProcs) {
		return fmt.Errorf("cannot check the recorded process groups: %w", err)
	}
	return err
}

// errNoProcs is killUntilGone's error when the process list cannot be read.
var errNoProcs = errors.New("cannot list processes")

// killUntilGone calls kill with the live processes until it reports that none it is after
// is left, bounded by ctx and reapWait. kill signals what it finds and returns its pids.
func killUntilGone(ctx context.Context, kill func([]procInfo) []int) error {
	deadline := time.Now().Add(reapWait)
	for {
		procs, err := readProcs()
		if err != nil {
			return fmt.Errorf("%w: %w", errNoProcs, err)
		}
		left := kill(procs)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still run %s after SIGKILL", left, reapWait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("processes %v still run: %w", left, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// marked returns the live processes whose environment carries one of the tokens.
func marked(procs []procInfo, tokens []string) []int {
	if len(tokens) == 0 {
		return nil
	}
	var out []int
	for _, p := range procs {
		if p.Zombie {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/environ")
		if err != nil {
			continue
		}
		for _, t := range tokens {
			if bytes.Contains(env, []byte(tokenEnv+"="+t+"\x00")) {
				out = append(out, p.PID)
				break
			}
		}
	}
	return out
}

// tokenEnv marks every process a command starts: it is written to the state directory
// before the command starts, so a talkops killed between the start and the group record
// still leaves a way to find the command's processes (they inherit the environment, even
// across setsid).
const tokenEnv = "TALKOPS_LOCAL_CMD"

func tokenFile(token string) string { return "cmd-" + token + ".json" }

type tokenRecord struct {
	Token  string `json:"token"`
	BootID string `json:"boot_id,omitempty"`
}

// recordToken makes a new command token and, with a state directory, writes it there
// before the command starts. Tokens are kept until the sandbox is closed or deleted: a
// process the command detached (setsid, a double fork, nohup) outlives the command and
// its process group, and its token is how Close and `sandbox gc` still find it.
func (s *sandbox) recordToken() (string, error) {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	if s.stateDir != "" {
		if err := writeJSON(filepath.Join(s.stateDir, tokenFile(token)), tokenRecord{Token: token, BootID: bootID()}); err != nil {
			return "", fmt.Errorf("record the command: %w", err)
		}
	}
	s.mu.Lock()
	s.tokens = append(s.tokens, token)
	s.mu.Unlock()
	return token, nil
}

// killMarked SIGKILLs every process carrying one of tokens in its environment and waits
// (bounded by ctx and reapWait) until none runs. Without /proc it does nothing.
func killMarked(ctx context.Context, tokens []string) error {
	if len(tokens) == 0 {
		return nil
	}
	err := killUntilGone(ctx, func(procs []procInfo) []int {
		left := marked(procs, tokens)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return left
	})
	if errors.Is(err, errNoProcs) {
		return nil
	}
	return err
}

// readTokens returns the command tokens recorded in dir for this boot.
func readTokens(dir, boot string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "cmd-") || !strings.HasSuffix(name, ".json") {
			continue
		}
		var t tokenRecord
		if readJSON(filepath.Join(dir, name), &t) != nil || t.Token == "" || (t.BootID != "" && boot != "" && t.BootID != boot) {
			continue
		}
		out = append(out, t.Token)
	}
	return out
}
