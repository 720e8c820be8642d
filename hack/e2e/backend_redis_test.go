//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// redisBackend is the local Redis of hack/backends/redis.sh: the e2e queue is the list
// e2e-jobs, whose LLEN the adapter serves as redis_e2e_jobs_length
// (hack/backends/redis.yaml). The hooks write as the default user, whose password file the
// script writes; count asks redis-cli as the adapter's own least-privilege user.
func redisBackend() queueBackend {
	const key = "e2e-jobs"
	redisEnv := backendEnv("redis")
	password := func(t *testing.T, file string) string {
		t.Helper()
		return secretFile(t, file, "a password of hack/backends/redis.sh start")
	}
	admin := func(t *testing.T) *goredis.Client {
		t.Helper()
		e := redisEnv(t)
		return goredis.NewClient(&goredis.Options{
			Addr:     e["METRICSCALE_REDIS_ADDR"],
			Password: password(t, e["METRICSCALE_REDIS_ADMIN_PASSWORD_FILE"]),
		})
	}
	return queueBackend{
		name:     "redis",
		metric:   "redis_e2e_jobs_length",
		selector: map[string]string{"key": key},
		publish: func(ctx context.Context, t *testing.T, n int) {
			t.Helper()
			c := admin(t)
			defer c.Close()
			jobs := make([]any, n)
			for i := range jobs {
				jobs[i] = "job-" + strconv.Itoa(i)
			}
			if n > 0 {
				if err := c.RPush(ctx, key, jobs...).Err(); err != nil {
					t.Fatalf("RPUSH %s (%d jobs): %v", key, n, err)
				}
			}
		},
		// Redis deletes an empty list; LLEN of a missing one is 0, so the metric reads 0
		drain: func(ctx context.Context, t *testing.T) {
			t.Helper()
			c := admin(t)
			defer c.Close()
			if err := c.Del(ctx, key).Err(); err != nil {
				t.Fatalf("DEL %s: %v", key, err)
			}
		},
		// redis-cli's LLEN, as the adapter's user sees it
		count: func(ctx context.Context, t *testing.T) int {
			t.Helper()
			e := redisEnv(t)
			host, port, ok := strings.Cut(e["METRICSCALE_REDIS_ADDR"], ":")
			if !ok {
				t.Fatalf("METRICSCALE_REDIS_ADDR = %q", e["METRICSCALE_REDIS_ADDR"])
			}
			cmd := exec.CommandContext(ctx, e["METRICSCALE_REDIS_CLI"], "-h", host, "-p", port,
				"--user", e["METRICSCALE_REDIS_USER"], "LLEN", key)
			// the password through the environment, not the command line
			cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+password(t, e["METRICSCALE_REDIS_PASSWORD_FILE"]))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("redis-cli LLEN %s: %v: %s", key, err, out)
			}
			n, err := strconv.Atoi(strings.TrimSpace(string(out)))
			if err != nil {
				t.Fatalf("redis-cli LLEN %s printed %q", key, out)
			}
			return n
		},
	}
}
