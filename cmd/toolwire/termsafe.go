package main

import "github.com/toolwire/toolwire/internal/safetext"

// termSafe makes server-controlled text safe to print on a terminal (see
// safetext.Escape): a tool's description or result must not move the cursor
// and overwrite the confirmation prompt, or reorder what the user reads.
func termSafe(s string) string { return safetext.Escape(s) }
