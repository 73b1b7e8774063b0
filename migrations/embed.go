// Package migrations holds the versioned schema of the ringchat store, one
// directory per SQL dialect, embedded in the binaries. Files follow goose's
// naming (NNNNN_name.sql) and annotations; both dialects must always carry the
// same versions.
package migrations

import "embed"

// FS holds mysql/*.sql and sqlite/*.sql.
//
//go:embed mysql/*.sql sqlite/*.sql
var FS embed.FS
