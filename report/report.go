// Package report publishes a run's verdict where people look. result.json is its only
// input: from it, it derives summary.md, junit.xml, gl-code-quality-report.json,
// results.sarif and findings.rdjsonl, and it publishes to GitHub (report/github) and
// GitLab (report/gitlab) when the environment says it runs there.
package report
