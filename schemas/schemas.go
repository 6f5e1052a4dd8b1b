// Package schemas embeds the project's JSON Schemas (config, policy, tool
// manifest, hook documents, events, session export) so the binary validates
// with exactly the schemas it documents.
package schemas

import "embed"

// FS holds every *.schema.json file of this directory.
//
//go:embed *.schema.json
var FS embed.FS
