package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwire/toolwire/task"
)

// Tasks returns the records of tasks: on PostgreSQL the fleet's table
// (toolwire.tasks), every instance of the fleet an instance of the tasks;
// for files the directory of one machine (task.DefaultDir, or
// Options.TasksDir), opened on first use. A command that only reads them
// (toolwire tasks) uses the same.
func (s *Store) Tasks() (*task.Store, error) {
	s.tasksMu.Lock()
	defer s.tasksMu.Unlock()
	if s.tasks != nil {
		return s.tasks, nil
	}
	if s.kind == Postgres {
		s.tasks = task.NewStore(&taskTable{pool: s.pool, instance: &s.instance}, nil)
		return s.tasks, nil
	}
	f, err := task.OpenFiles(s.tasksDir)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s.taskFiles = f
	s.tasks = task.NewStore(f, nil)
	return s.tasks, nil
}

// taskTable is toolwire.tasks as a [task.Backend]. Instances are those of
// toolwire.instances, by their id.
type taskTable struct {
	pool     *pgxpool.Pool
	instance *atomic.Int32 // the store's: a new id once it claims again after being taken for lost
}

func (t *taskTable) Instance() string { return strconv.Itoa(int(t.instance.Load())) }

const taskColumns = `id, owner, tool, status, message, progress, total, result, error, created_at, updated_at, ttl_ms, expires_at, instance, server, upstream_task`

func scanTask(row pgx.Row) (*task.Record, error) {
	var r task.Record
	var status string
	var ttl int64
	if err := row.Scan(&r.ID, &r.Owner, &r.Tool, &status, &r.Message, &r.Progress, &r.Total, &r.Result, &r.Error,
		&r.Created, &r.Updated, &ttl, &r.Expires, &r.Instance, &r.Server, &r.UpstreamTask); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, task.ErrNotFound
		}
		return nil, err
	}
	r.Status, r.TTL = task.Status(status), time.Duration(ttl)*time.Millisecond
	r.Created, r.Updated, r.Expires = r.Created.UTC(), r.Updated.UTC(), r.Expires.UTC()
	return &r, nil
}

func (t *taskTable) Insert(ctx context.Context, r *task.Record) error {
	_, err := t.pool.Exec(ctx, `INSERT INTO toolwire.tasks (`+taskColumns+`)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		r.ID, r.Owner, r.Tool, string(r.Status), r.Message, r.Progress, r.Total, []byte(r.Result), []byte(r.Error),
		r.Created, r.Updated, r.TTL.Milliseconds(), r.Expires, r.Instance, r.Server, r.UpstreamTask)
	return err
}

func (t *taskTable) Load(ctx context.Context, id string) (*task.Record, error) {
	return scanTask(t.pool.QueryRow(ctx, `SELECT `+taskColumns+` FROM toolwire.tasks WHERE id = $1`, id))
}

func (t *taskTable) Update(ctx context.Context, id string, change func(*task.Record) error) (*task.Record, error) {
	var out *task.Record
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		r, err := scanTask(tx.QueryRow(ctx, `SELECT `+taskColumns+` FROM toolwire.tasks WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return err
		}
		if err := change(r); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE toolwire.tasks SET status = $2, message = $3, progress = $4, total = $5,
	result = $6, error = $7, updated_at = $8, instance = $9, server = $10, upstream_task = $11 WHERE id = $1`,
			id, string(r.Status), r.Message, r.Progress, r.Total, []byte(r.Result), []byte(r.Error), r.Updated, r.Instance, r.Server, r.UpstreamTask); err != nil {
			return err
		}
		out = r
		return nil
	})
	return out, err
}

func (t *taskTable) List(ctx context.Context, q task.Query, now time.Time) ([]*task.Record, error) {
	sql := `SELECT ` + taskColumns + ` FROM toolwire.tasks WHERE expires_at > $1`
	args := []any{now}
	if !q.All {
		args = append(args, q.Owner)
		sql += ` AND owner = $` + strconv.Itoa(len(args))
	}
	if q.After != nil {
		args = append(args, q.After.Created, q.After.ID)
		sql += ` AND (created_at, id) > ($` + strconv.Itoa(len(args)-1) + `, $` + strconv.Itoa(len(args)) + `)`
	}
	sql += ` ORDER BY created_at, id`
	if q.Limit > 0 {
		args = append(args, q.Limit)
		sql += ` LIMIT $` + strconv.Itoa(len(args))
	}
	rows, err := t.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*task.Record
	for rows.Next() {
		r, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (t *taskTable) Prune(ctx context.Context, now time.Time) (int, error) {
	tag, err := t.pool.Exec(ctx, `DELETE FROM toolwire.tasks WHERE expires_at <= $1`, now)
	return int(tag.RowsAffected()), err
}

// Lost: the instance ended without giving its tasks an outcome, or a
// replica recovered it (see recoverInstance), or its row is long gone.
func (t *taskTable) Lost(ctx context.Context, instance string) (bool, error) {
	id, err := strconv.ParseInt(instance, 10, 32)
	if err != nil {
		return true, nil // no instance of this fleet's
	}
	var gone bool
	err = t.pool.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM toolwire.instances
WHERE id = $1 AND ended_at IS NULL AND recovered_at IS NULL)`, int32(id)).Scan(&gone)
	return gone, err
}
