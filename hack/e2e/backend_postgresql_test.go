//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// postgresqlBackend is the local PostgreSQL of hack/backends/postgresql.sh: the e2e queue is
// the rows of table jobs with queue 'e2e-jobs'; the adapter's metric counts those in state
// 'pending' (hack/backends/postgresql.yaml). The hooks write as e2e_writer, the role the
// script creates for the tests (owner of jobs), over TCP with its password file.
func postgresqlBackend() queueBackend {
	const queue = "e2e-jobs"
	pgEnv := backendEnv("postgresql")
	writerPassword := func(t *testing.T, e map[string]string) string {
		t.Helper()
		return secretFile(t, e["METRICSCALE_POSTGRESQL_WRITER_PASSWORD_FILE"], "the e2e writer's password (hack/backends/postgresql.sh start)")
	}
	run := func(ctx context.Context, t *testing.T, sql string, args ...any) {
		t.Helper()
		e := pgEnv(t)
		cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s dbname=%s user=%s sslmode=disable",
			e["METRICSCALE_POSTGRESQL_HOST"], e["METRICSCALE_POSTGRESQL_PORT"], e["METRICSCALE_POSTGRESQL_DATABASE"], e["METRICSCALE_POSTGRESQL_WRITER"]))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Password = writerPassword(t, e)
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("connecting as the e2e writer: %v", err)
		}
		defer c.Close(context.WithoutCancel(ctx))
		if _, err := c.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	return queueBackend{
		name:     "postgresql",
		metric:   "postgresql_jobs_pending",
		selector: map[string]string{"queue": queue},
		publish: func(ctx context.Context, t *testing.T, n int) {
			t.Helper()
			run(ctx, t, "INSERT INTO jobs (queue, state) SELECT $1, 'pending' FROM generate_series(1, $2::int)", queue, n)
		},
		// done, not deleted: the queue keeps its row in the metric's GROUP BY, so it
		// reads 0 (and the autoscaler scales back) instead of disappearing
		drain: func(ctx context.Context, t *testing.T) {
			t.Helper()
			run(ctx, t, "UPDATE jobs SET state = 'done' WHERE queue = $1 AND state = 'pending'", queue)
		},
		// psql's count, as the adapter's role sees it
		count: func(ctx context.Context, t *testing.T) int {
			t.Helper()
			e := pgEnv(t)
			pw := secretFile(t, e["METRICSCALE_POSTGRESQL_PASSWORD_FILE"], "the adapter role's password (hack/backends/postgresql.sh start)")
			cmd := exec.CommandContext(ctx, e["METRICSCALE_POSTGRESQL_PSQL"], "-X", "-tA", "-h", e["METRICSCALE_POSTGRESQL_HOST"],
				"-p", e["METRICSCALE_POSTGRESQL_PORT"], "-U", e["METRICSCALE_POSTGRESQL_USER"], "-d", e["METRICSCALE_POSTGRESQL_DATABASE"],
				"-c", "SELECT count(*) FROM jobs WHERE queue = '"+queue+"' AND state = 'pending'")
			cmd.Env = append(os.Environ(), "PGPASSWORD="+pw)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("psql: %v: %s", err, out)
			}
			n, err := strconv.Atoi(strings.TrimSpace(string(out)))
			if err != nil {
				t.Fatalf("psql printed %q", out)
			}
			return n
		},
	}
}
