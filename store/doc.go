// Package store is toolwire's one store setting: everything that several
// gateways serving one fleet must agree on (tool pins, OAuth tokens, the
// audit log, per-caller rate limits, MCP session records) behind one
// [Open], on files for one machine or on PostgreSQL for a fleet.
//
//	st, err := store.Open(ctx, cfg.Store, &store.Options{AuditFile: path})
//	// "" → files (pins.json, oauth.json, the audit file), as before;
//	// "postgres://user@db:5432/toolwire" → PostgreSQL, migrated at start-up.
//	...
//	defer st.Close()
//	mcpclient.Options{Pins: st.Pins(), ...}   // *pins.Store, either way
//	oauth.NewTokenSource(st.Tokens(), ...)    // *oauth.Store, either way
//	audit.NewLog(st.Audit(), ...)             // audit.Sink, either way
//	st.Pins().Watch(recheck)                  // another replica's approval
//
// Each consumer keeps its own API: a [pins.Store] on a [pins.Backend], an
// [oauth.Store] on [oauth.Records] (ciphertext only), an [audit.Sink] that
// extends a hash chain (the file's; on PostgreSQL this process's own
// chain, verified with the others'). [Limiter] and [Sessions] have two
// implementations each: in memory (one process, as the gateway is today)
// and in the database (one truth for the fleet).
//
// On PostgreSQL, [Open] applies the schema migrations it carries
// (migrations/*.sql, recorded in toolwire.schema_migrations) under a
// transaction-level advisory lock, so replicas starting together apply
// each migration once; it refuses a database migrated by a newer toolwire.
// Changes of the pins, and deletions of sessions, reach every replica
// through LISTEN/NOTIFY on one connection per Store, which also holds the
// process's instance lock: every Store on PostgreSQL is an instance of the
// fleet, and one that is gone without closing is found and its open calls
// given their outcome in the audit table. [Relay] passes requests between
// instances (a retry to the replica holding its parked call). docs/fleet.md
// describes the schema.
package store
