package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// pgQueue is the queue column's value of the e2e rows of table jobs, whose
// pending rows hack/backends/postgresql.yaml counts as postgresql_jobs_pending.
const pgQueue = "e2e-jobs"

type postgresQueue struct{ c *pgx.Conn }

func openPostgreSQL(ctx context.Context, env map[string]string) (queue, error) {
	// The writer role owns jobs; the adapter's may only read it.
	pw, err := secret("postgresql", env["METRICSCALE_POSTGRESQL_WRITER_PASSWORD_FILE"])
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s dbname=%s user=%s sslmode=disable",
		envOr(env, "METRICSCALE_POSTGRESQL_HOST", "127.0.0.1"), envOr(env, "METRICSCALE_POSTGRESQL_PORT", "15432"),
		envOr(env, "METRICSCALE_POSTGRESQL_DATABASE", "e2e"), envOr(env, "METRICSCALE_POSTGRESQL_WRITER", "e2e_writer")))
	if err != nil {
		return nil, fmt.Errorf("postgresql: %w", err)
	}
	cfg.Password = pw
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgresql: connecting as %s: %w", cfg.User, err)
	}
	// Done, not deleted: the queue keeps its row in the metric's GROUP BY and
	// reads 0 instead of disappearing.
	if _, err := c.Exec(ctx, "UPDATE jobs SET state = 'done' WHERE queue = $1 AND state = 'pending'", pgQueue); err != nil {
		c.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("postgresql: emptying queue %s: %w", pgQueue, err)
	}
	// One done row, so that the metric has a series (0) before the first job.
	if _, err := c.Exec(ctx, "INSERT INTO jobs (queue, state) VALUES ($1, 'done')", pgQueue); err != nil {
		c.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("postgresql: queue %s: %w", pgQueue, err)
	}
	return &postgresQueue{c}, nil
}

func (q *postgresQueue) Publish(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	if _, err := q.c.Exec(ctx, "INSERT INTO jobs (queue, state) SELECT $1, 'pending' FROM generate_series(1, $2::int)", pgQueue, n); err != nil {
		return fmt.Errorf("postgresql: inserting %d jobs: %w", n, err)
	}
	return nil
}

// Consume marks the oldest pending rows done; SKIP LOCKED is how concurrent
// workers would each take their own.
func (q *postgresQueue) Consume(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	tag, err := q.c.Exec(ctx, `UPDATE jobs SET state = 'done' WHERE id IN (
		SELECT id FROM jobs WHERE queue = $1 AND state = 'pending' ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)`, pgQueue, n)
	if err != nil {
		return 0, fmt.Errorf("postgresql: taking %d jobs: %w", n, err)
	}
	return int(tag.RowsAffected()), nil
}

func (q *postgresQueue) Close() error { return q.c.Close(context.Background()) }
