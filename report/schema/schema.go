// Package schema holds the JSON Schema of result.json (talkops.result/v1), embedded so the
// binary validates what it writes and what it reads back without touching the network.
package schema

import _ "embed"

// ResultJSON is the JSON Schema (draft 2020-12) of result.json.
//
//go:embed result.schema.json
var ResultJSON []byte

// ResultURL is the schema's $id; validation errors name locations relative to it.
const ResultURL = "https://github.com/talkops/talkops/report/schema/result.schema.json"
