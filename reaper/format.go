package reaper

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints entries as an aligned table for `talkops sandbox ls`.
func WriteTable(w io.Writer, entries []Entry, now time.Time) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "no sandboxes")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tID\tRUN ID\tSTATE\tAGE\tEXPIRES\tOWNER\tLEDGER")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			e.Provider, idCell(e), dash(e.RunID), dash(e.State), age(e.CreatedAt, now),
			expires(e.ExpiresAt, now), owner(e), yesNo(e.InLedger))
	}
	return tw.Flush()
}

// WriteReport prints what gc did (or would do) for `talkops sandbox gc`.
func WriteReport(w io.Writer, rep Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	verb := "deleted"
	if rep.DryRun {
		verb = "would delete"
	}
	rows := []struct {
		what    string
		actions []Action
	}{
		{verb, rep.Deleted},
		{"failed", rep.Failed},
		{"forgot", rep.Forgotten},
		{"kept", rep.Kept},
	}
	n := 0
	for _, r := range rows {
		for _, a := range r.actions {
			if n == 0 {
				fmt.Fprintln(tw, "ACTION\tPROVIDER\tID\tRUN ID\tREASON")
			}
			n++
			reason := a.Reason
			if a.Error != "" {
				reason += ": " + a.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.what, a.Provider, idCell(a.Entry), dash(a.RunID), reason)
		}
	}
	if n == 0 {
		fmt.Fprintln(tw, "no sandboxes")
	}
	fmt.Fprintf(tw, "\n%d %s, %d failed, %d ledger entries forgotten, %d kept\n",
		len(rep.Deleted), verb, len(rep.Failed), len(rep.Forgotten), len(rep.Kept))
	return tw.Flush()
}

// WriteJSON prints v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// idCell is the ID column: the sandbox id, or "(pending)" for a create with no id yet.
func idCell(e Entry) string {
	if e.Pending {
		return "(pending)"
	}
	return shortID(e.ID)
}

// shortID shortens 64-hex container ids the way docker ps does.
func shortID(id string) string {
	if len(id) == 64 && strings.Trim(id, "0123456789abcdef") == "" {
		return id[:12]
	}
	return id
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return human(now.Sub(t))
}

func expires(t, now time.Time) string {
	switch {
	case t.IsZero():
		return "-"
	case now.Before(t):
		return "in " + human(t.Sub(now))
	default:
		return human(now.Sub(t)) + " ago"
	}
}

func owner(e Entry) string {
	if e.OwnerPID <= 0 {
		return "-"
	}
	s := fmt.Sprintf("pid %d", e.OwnerPID)
	if e.OwnerHost != "" && e.Owner == OwnerUnknown {
		s += "@" + e.OwnerHost
	}
	return s + " (" + e.Owner + ")"
}

// human renders a duration as the largest one or two units: 45s, 5m, 2h10m, 3d4h.
func human(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		h := int(d.Hours())
		if m := int(d.Minutes()) % 60; m != 0 {
			return fmt.Sprintf("%dh%dm", h, m)
		}
		return fmt.Sprintf("%dh", h)
	default:
		days := int(d.Hours()) / 24
		if h := int(d.Hours()) % 24; h != 0 {
			return fmt.Sprintf("%dd%dh", days, h)
		}
		return fmt.Sprintf("%dd", days)
	}
}
