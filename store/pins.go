package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwire/toolwire/pins"
)

// pinsLockClass is the first key of the advisory locks that serialize the
// changes of one server's pins (the second is the hash of its name).
const pinsLockClass int32 = 0x70696e73 // "pins"

// pinTable is the pins' [pins.Backend] on PostgreSQL: toolwire.pins and
// toolwire.pins_noticed, changes serialized per server name by a
// transaction-level advisory lock and announced with NOTIFY in the same
// transaction, so that a watcher hears of a change once it is committed.
type pinTable struct {
	pool     *pgxpool.Pool
	listener *listener
}

var _ pins.Backend = (*pinTable)(nil)

// pinRows selects the pins and the noticed tools in one statement, so that
// both come from one snapshot. A noticed row has noticed set and only its
// fingerprint filled in.
const pinRows = `
SELECT server, identity, tool, fingerprint, name_hash, description_hash, input_schema_hash,
       annotations_hash, approved_at, first_use, snippet, registered, false AS noticed
  FROM toolwire.pins %[1]s
UNION ALL
SELECT server, identity, tool, fingerprint, '', '', '', '', 'epoch'::timestamptz, false, '', '', true
  FROM toolwire.pins_noticed %[1]s`

var (
	allPinRows    = fmt.Sprintf(pinRows, "")
	serverPinRows = fmt.Sprintf(pinRows, "WHERE server = $1")
)

func (t *pinTable) Sets(ctx context.Context) ([]pins.Set, error) {
	rows, err := t.pool.Query(ctx, allPinRows)
	if err != nil {
		return nil, err
	}
	return collectSets(rows)
}

// collectSets groups rows of pinRows by scope.
func collectSets(rows pgx.Rows) ([]pins.Set, error) {
	defer rows.Close()
	byScope := map[pins.Scope]*pins.Set{}
	var order []pins.Scope
	for rows.Next() {
		var (
			sc      pins.Scope
			tool    string
			p       pins.Pin
			noticed bool
		)
		if err := rows.Scan(&sc.Server, &sc.Identity, &tool, &p.Fingerprint, &p.Fields.Name, &p.Fields.Description,
			&p.Fields.InputSchema, &p.Fields.Annotations, &p.ApprovedAt, &p.FirstUse, &p.Snippet, &p.Registered, &noticed); err != nil {
			return nil, err
		}
		st := byScope[sc]
		if st == nil {
			st = &pins.Set{Scope: sc, Tools: map[string]pins.Pin{}}
			byScope[sc] = st
			order = append(order, sc)
		}
		if noticed {
			if st.Noticed == nil {
				st.Noticed = map[string]string{}
			}
			st.Noticed[tool] = p.Fingerprint
			continue
		}
		p.ApprovedAt = p.ApprovedAt.UTC()
		st.Tools[tool] = p
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]pins.Set, 0, len(order))
	for _, sc := range order {
		out = append(out, *byScope[sc])
	}
	return out, nil
}

// pinKey names one row of either table.
type pinKey struct {
	scope pins.Scope
	tool  string
}

func (t *pinTable) Update(ctx context.Context, server string, change func([]pins.Set) ([]pins.Set, error)) error {
	tx, err := t.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", pinsLockClass, server); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, serverPinRows, server)
	if err != nil {
		return err
	}
	sets, err := collectSets(rows)
	if err != nil {
		return err
	}
	// change edits the sets in place: keep what they held to compare.
	beforePins, beforeNoticed := flatten(sets)
	after, err := change(sets)
	if err != nil {
		return err
	}
	afterPins, afterNoticed := flatten(after)

	b := &pgx.Batch{}
	for k := range beforePins {
		if _, ok := afterPins[k]; !ok {
			b.Queue("DELETE FROM toolwire.pins WHERE server = $1 AND identity = $2 AND tool = $3", k.scope.Server, k.scope.Identity, k.tool)
		}
	}
	for k, p := range afterPins {
		if old, ok := beforePins[k]; ok && samePin(old, p) {
			continue
		}
		b.Queue(`INSERT INTO toolwire.pins (server, identity, tool, fingerprint, name_hash, description_hash,
	input_schema_hash, annotations_hash, approved_at, first_use, snippet, registered)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (server, identity, tool) DO UPDATE SET fingerprint = $4, name_hash = $5, description_hash = $6,
	input_schema_hash = $7, annotations_hash = $8, approved_at = $9, first_use = $10, snippet = $11, registered = $12`,
			k.scope.Server, k.scope.Identity, k.tool, p.Fingerprint, p.Fields.Name, p.Fields.Description,
			p.Fields.InputSchema, p.Fields.Annotations, p.ApprovedAt, p.FirstUse, p.Snippet, p.Registered)
	}
	for k := range beforeNoticed {
		if _, ok := afterNoticed[k]; !ok {
			b.Queue("DELETE FROM toolwire.pins_noticed WHERE server = $1 AND identity = $2 AND tool = $3", k.scope.Server, k.scope.Identity, k.tool)
		}
	}
	for k, fp := range afterNoticed {
		if old, ok := beforeNoticed[k]; ok && old == fp {
			continue
		}
		b.Queue(`INSERT INTO toolwire.pins_noticed (server, identity, tool, fingerprint) VALUES ($1, $2, $3, $4)
ON CONFLICT (server, identity, tool) DO UPDATE SET fingerprint = $4`, k.scope.Server, k.scope.Identity, k.tool, fp)
	}
	if b.Len() == 0 {
		return tx.Commit(ctx)
	}
	// Delivered to the listeners when the transaction commits.
	b.Queue("SELECT pg_notify($1, $2)", pinsChannel, server)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// flatten returns sets' pins and noticed tools by row.
func flatten(sets []pins.Set) (map[pinKey]pins.Pin, map[pinKey]string) {
	ps, ns := map[pinKey]pins.Pin{}, map[pinKey]string{}
	for _, st := range sets {
		for tool, p := range st.Tools {
			ps[pinKey{st.Scope, tool}] = p
		}
		for tool, fp := range st.Noticed {
			ns[pinKey{st.Scope, tool}] = fp
		}
	}
	return ps, ns
}

// samePin compares pins as the table keeps them: times to the microsecond.
func samePin(a, b pins.Pin) bool {
	ta, tb := a.ApprovedAt, b.ApprovedAt
	a.ApprovedAt, b.ApprovedAt = time.Time{}, time.Time{}
	return a == b && ta.Truncate(time.Microsecond).Equal(tb.Truncate(time.Microsecond))
}

func (t *pinTable) Watch(fn func(server string)) (stop func()) {
	return t.listener.watch(pinsChannel, fn)
}
