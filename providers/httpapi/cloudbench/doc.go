// Package cloudbench measures the requests and bytes one talkops run costs on each remote
// provider, against the provider's fake: create, sync a 2,000-file project, run 10
// commands, delete. It compares the one-archive sync (workspace.Sync into Sandbox.Upload)
// with the file-by-file upload in batches of 20 that the published TalkOps code does,
// which exists only in this package's benchmark.
//
//	go test -run '^$' -bench . -benchtime 3x ./providers/httpapi/cloudbench/
package cloudbench
