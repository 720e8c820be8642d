package main

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
)

// redisKey is the list hack/backends/redis.yaml serves as redis_e2e_jobs_length.
const redisKey = "e2e-jobs"

// redisQueue is a list: producers RPUSH, workers LPOP from the other end.
type redisQueue struct{ c *goredis.Client }

func openRedis(ctx context.Context, env map[string]string) (queue, error) {
	// The default user: the adapter's own may only read.
	pw, err := secret("redis", env["METRICSCALE_REDIS_ADMIN_PASSWORD_FILE"])
	if err != nil {
		return nil, err
	}
	c := goredis.NewClient(&goredis.Options{Addr: envOr(env, "METRICSCALE_REDIS_ADDR", "127.0.0.1:16379"), Password: pw})
	// Redis deletes an empty list, and LLEN of a missing one is 0: DEL empties it.
	if err := c.Del(ctx, redisKey).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis: DEL %s: %w", redisKey, err)
	}
	return &redisQueue{c}, nil
}

func (q *redisQueue) Publish(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	jobs := make([]any, n)
	for i := range jobs {
		jobs[i] = "job"
	}
	if err := q.c.RPush(ctx, redisKey, jobs...).Err(); err != nil {
		return fmt.Errorf("redis: RPUSH %s: %w", redisKey, err)
	}
	return nil
}

func (q *redisQueue) Consume(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	got, err := q.c.LPopCount(ctx, redisKey, n).Result()
	if errors.Is(err, goredis.Nil) {
		return 0, nil // empty
	}
	if err != nil {
		return 0, fmt.Errorf("redis: LPOP %s: %w", redisKey, err)
	}
	return len(got), nil
}

func (q *redisQueue) Close() error { return q.c.Close() }
