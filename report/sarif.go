package report

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
)

// SARIFSchemaURI is the $schema written into results.sarif.
const SARIFSchemaURI = "https://json.schemastore.org/sarif-2.1.0.json"

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool              sarifTool              `json:"tool"`
	AutomationDetails *sarifAutomation       `json:"automationDetails,omitempty"`
	Results           []sarifResult          `json:"results"`
	Invocations       []sarifInvocation      `json:"invocations,omitempty"`
	Properties        map[string]interface{} `json:"properties,omitempty"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name            string      `json:"name"`
	InformationURI  string      `json:"informationUri,omitempty"`
	Version         string      `json:"version,omitempty"`
	SemanticVersion string      `json:"semanticVersion,omitempty"`
	Rules           []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID                   string               `json:"id"`
	Name                 string               `json:"name,omitempty"`
	ShortDescription     sarifText            `json:"shortDescription"`
	FullDescription      sarifText            `json:"fullDescription"`
	Help                 sarifText            `json:"help"`
	DefaultConfiguration sarifConfiguration   `json:"defaultConfiguration"`
	Properties           *sarifRuleProperties `json:"properties,omitempty"`
}

type sarifRuleProperties struct {
	Tags []string `json:"tags,omitempty"`
}

type sarifConfiguration struct {
	Level string `json:"level"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifAutomation struct {
	ID string `json:"id"`
}

type sarifInvocation struct {
	ExecutionSuccessful bool `json:"executionSuccessful"`
	ExitCode            int  `json:"exitCode"`
}

type sarifResult struct {
	RuleID              string            `json:"ruleId"`
	RuleIndex           int               `json:"ruleIndex"`
	Level               string            `json:"level"`
	Message             sarifText         `json:"message"`
	Locations           []sarifLocation   `json:"locations"`
	PartialFingerprints map[string]string `json:"partialFingerprints"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI       string `json:"uri"`
	URIBaseID string `json:"uriBaseId,omitempty"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn,omitempty"`
	EndLine     int `json:"endLine,omitempty"`
	EndColumn   int `json:"endColumn,omitempty"`
}

const (
	sarifDescriptionBytes = 1024
	sarifMessageBytes     = 16 << 10
	// sarifMaxResults is GitHub code scanning's per-run limit.
	sarifMaxResults = 25000
)

// SARIFLevel maps a severity to a SARIF level.
func SARIFLevel(severity string) string {
	switch severity {
	case result.SeverityError:
		return "error"
	case result.SeverityWarning:
		return "warning"
	}
	return "note"
}

// SARIF renders the located findings as SARIF 2.1.0 that GitHub code scanning accepts:
// one rule per distinct rule id (with the short, full and help texts GitHub requires),
// results with a repository-relative URI and region, and a partial fingerprint derived
// from the finding's fingerprint (stable across line shifts). Findings without a
// repository path are left out: code scanning rejects results without a location.
func SARIF(r *result.Result, red *hygiene.Redactor) ([]byte, error) {
	t := func(s string) string { return red.Text(s) }
	rules := map[string]*sarifRule{}
	var results []sarifResult
	for _, f := range render.Findings(r) {
		if !f.Located || len(results) >= sarifMaxResults {
			continue
		}
		id := t(ruleID(f))
		rule := rules[id]
		level := SARIFLevel(f.Severity)
		if rule == nil {
			short := f.Title
			if short == "" {
				short = id
			}
			full := short
			if f.Item != nil && f.Item.Title != "" {
				full = f.Item.Title
			}
			rule = &sarifRule{
				ID:                   id,
				Name:                 id,
				ShortDescription:     sarifText{Text: hygiene.Truncate(oneLine(t(short)), sarifDescriptionBytes)},
				FullDescription:      sarifText{Text: hygiene.Truncate(oneLine(t(full)), sarifDescriptionBytes)},
				Help:                 sarifText{Text: hygiene.Truncate(t(helpText(r, f)), sarifDescriptionBytes)},
				DefaultConfiguration: sarifConfiguration{Level: level},
				Properties:           &sarifRuleProperties{Tags: []string{"talkops"}},
			}
			rules[id] = rule
		} else if render.SeverityRank(f.Severity) < render.SeverityRank(severityOfLevel(rule.DefaultConfiguration.Level)) {
			rule.DefaultConfiguration.Level = level
		}
		msg := f.Message
		if f.Title != "" {
			msg = f.Title + ": " + msg
		}
		loc := sarifLocation{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: f.Path, URIBaseID: "%SRCROOT%"}}}
		if f.StartLine > 0 {
			rg := &sarifRegion{StartLine: f.StartLine}
			if end := f.EndLineOrStart(); end != f.StartLine {
				rg.EndLine = end
			} else if f.StartColumn > 0 {
				rg.StartColumn = f.StartColumn
				if f.EndColumn >= f.StartColumn {
					rg.EndColumn = f.EndColumn + 1 // SARIF end columns are exclusive
				}
			}
			loc.PhysicalLocation.Region = rg
		}
		results = append(results, sarifResult{
			RuleID:    id,
			Level:     level,
			Message:   sarifText{Text: hygiene.Truncate(t(msg), sarifMessageBytes)},
			Locations: []sarifLocation{loc},
			PartialFingerprints: map[string]string{
				// GitHub tracks alerts by this key; ours ignores line numbers on purpose.
				"primaryLocationLineHash": f.PublicFingerprint()[:16] + ":1",
				"talkopsFingerprint/v1":   f.PublicFingerprint(),
			},
		})
	}
	ids := slices.Sorted(maps.Keys(rules))
	index := map[string]int{}
	driver := sarifDriver{
		Name:           "talkops",
		InformationURI: "https://github.com/talkops/talkops",
		Version:        t(r.Run.Version),
		Rules:          []sarifRule{},
	}
	if isSemver(r.Run.Version) {
		driver.SemanticVersion = r.Run.Version
	}
	for i, id := range ids {
		index[id] = i
		driver.Rules = append(driver.Rules, *rules[id])
	}
	for i := range results {
		results[i].RuleIndex = index[results[i].RuleID]
	}
	if results == nil {
		results = []sarifResult{}
	}
	category := "talkops/"
	if r.Rubric != nil && r.Rubric.Name != "" {
		category = "talkops/" + oneLine(t(r.Rubric.Name)) + "/"
	}
	log := sarifLog{
		Schema:  SARIFSchemaURI,
		Version: "2.1.0",
		Runs: []sarifRun{{
			Tool:              sarifTool{Driver: driver},
			AutomationDetails: &sarifAutomation{ID: category},
			Results:           results,
			Invocations:       []sarifInvocation{{ExecutionSuccessful: completed(r), ExitCode: r.ExitCode}},
		}},
	}
	data, err := json.MarshalIndent(log, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode sarif: %w", err)
	}
	return append(data, '\n'), nil
}

func severityOfLevel(level string) string {
	switch level {
	case "error":
		return result.SeverityError
	case "warning":
		return result.SeverityWarning
	}
	return result.SeverityNotice
}

func helpText(r *result.Result, f render.Finding) string {
	switch {
	case f.Item != nil:
		return fmt.Sprintf("Reported by talkops rubric item %q (%s).", f.Item.ID, f.Item.Kind)
	case f.Source == "agent":
		return "Reported by the talkops agent while working on the prompt."
	}
	return "Reported by talkops."
}

func isSemver(v string) bool {
	if v == "" {
		return false
	}
	dots := 0
	for i, c := range v {
		switch {
		case c >= '0' && c <= '9':
		case c == '.' && i > 0:
			dots++
		case c == '-' || c == '+':
			return dots == 2
		default:
			return false
		}
	}
	return dots == 2
}

// completed reports whether the run finished its work: a run without a verdict, cut short
// by a budget or interrupted did not, whatever its exit code (--advisory maps 3 and 124
// to 0), so no consumer mistakes it for a clean run.
func completed(r *result.Result) bool {
	return r.Verdict != result.VerdictError && !r.Partial && r.Interrupted == ""
}
