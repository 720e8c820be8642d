package postgresql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/hack/freeport"
	"github.com/metricscale/metricscale/providers"
)

// pgServer is a throwaway PostgreSQL started by the test: initdb into a
// temp dir, 127.0.0.1 on a free port, its socket in the data dir.
type pgServer struct {
	bin, data, log string
	port           int
	asPostgres     bool // we are root: run the server as the postgres user
}

func pgBin(t *testing.T) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "postgres")); err == nil {
			return dirs[i]
		}
	}
	t.Skip("no PostgreSQL server binary (/usr/lib/postgresql/*/bin/postgres): install Debian's postgresql (hack/cluster.sh install-backends)")
	return ""
}

func (s *pgServer) cmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, name)
	if s.asPostgres {
		return exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	return exec.CommandContext(ctx, path, args...)
}

func (s *pgServer) run(t *testing.T, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if out, err := s.cmd(ctx, name, args...).CombinedOutput(); err != nil {
		logTail, _ := os.ReadFile(s.log)
		t.Fatalf("%s %s: %v\n%s\nserver log:\n%s", name, strings.Join(args, " "), err, out, logTail)
	}
}

func (s *pgServer) start(t *testing.T) {
	t.Helper()
	s.run(t, "pg_ctl", "-D", s.data, "-l", s.log, "-w", "-t", "60", "start")
}

func (s *pgServer) stop(t *testing.T) {
	t.Helper()
	s.run(t, "pg_ctl", "-D", s.data, "-m", "fast", "-w", "-t", "60", "stop")
}

func startPG(t *testing.T) *pgServer {
	t.Helper()
	s := &pgServer{bin: pgBin(t), asPostgres: os.Geteuid() == 0}
	dir, err := os.MkdirTemp("", "metricscale-postgresql-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if s.asPostgres {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, the server needs the postgres user (Debian's package creates it): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	s.port = freeport.For(t) // initdb runs before the server binds it
	s.data, s.log = filepath.Join(dir, "data"), filepath.Join(dir, "server.log")
	// trust on the socket (in the 0700 data dir: only postgres and root
	// reach it), passwords over TCP
	s.run(t, "initdb", "-D", s.data, "-U", "postgres", "-E", "UTF8", "--no-locale", "--auth-local=trust", "--auth-host=scram-sha-256")
	conf := fmt.Sprintf("listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\nfsync = off\nshared_buffers = 16MB\nmax_connections = 30\n", s.port, s.data)
	f, err := os.OpenFile(filepath.Join(s.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(conf); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s.start(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.cmd(ctx, "pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop").Run()
	})
	return s
}

// superuser connects as postgres through the socket.
func (s *pgServer) superuser(t *testing.T, db string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", s.data, s.port, db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func mustExec(t *testing.T, c *pgx.Conn, sql string) {
	t.Helper()
	if _, err := c.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// psqlCount is the reference: what psql says the count is.
func (s *pgServer) psqlCount(t *testing.T, password, sql string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "psql"), "-X", "-tA", "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "metricscale", "-d", "app", "-c", sql)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("psql -c %q: %v: %s", sql, err, out)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("psql -c %q printed %q", sql, out)
	}
	return n
}

const pendingQuery = "SELECT queue, count(*) FILTER (WHERE state = 'pending') AS value FROM jobs GROUP BY queue"

func TestIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server")
	}
	srv := startPG(t)
	su := srv.superuser(t, "postgres")
	const password = "s3cret-Pa55word-never-shown"
	mustExec(t, su, "CREATE DATABASE app")
	mustExec(t, su, "CREATE ROLE metricscale LOGIN PASSWORD '"+password+"'")
	mustExec(t, su, "ALTER ROLE metricscale SET default_transaction_read_only = on")
	mustExec(t, su, "REVOKE CONNECT ON DATABASE postgres FROM PUBLIC")
	app := srv.superuser(t, "app")
	for _, sql := range []string{
		"REVOKE ALL ON DATABASE app FROM PUBLIC",
		"GRANT CONNECT ON DATABASE app TO metricscale",
		"CREATE TABLE jobs (id serial PRIMARY KEY, queue text NOT NULL, state text NOT NULL DEFAULT 'pending')",
		"GRANT SELECT ON jobs TO metricscale",
	} {
		mustExec(t, app, sql)
	}
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// newProvWith is newProv with extra options
	newProvWith := func(t *testing.T, extra map[string]any, host, user, pwFile string, cacheTTL string, metrics ...map[string]any) *Provider {
		t.Helper()
		o := map[string]any{
			"host": host, "port": srv.port, "database": "app", "user": user, "sslMode": "disable",
			"statementTimeout": "500ms", "connectTimeout": "1s", "cacheTTL": cacheTTL, "metrics": metrics,
		}
		for k, v := range extra {
			o[k] = v
		}
		if pwFile != "" {
			o["password"] = map[string]string{"file": pwFile}
		}
		raw, _ := json.Marshal(o)
		if err := (Factory{}).Validate("options", raw); err != nil {
			t.Fatal(err)
		}
		p, err := Factory{}.New("pg-it", raw, providers.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.(*Provider).Close() })
		return p.(*Provider)
	}
	newProv := func(t *testing.T, host, user, pwFile string, cacheTTL string, metrics ...map[string]any) *Provider {
		t.Helper()
		return newProvWith(t, nil, host, user, pwFile, cacheTTL, metrics...)
	}
	pending := map[string]any{"name": "postgresql_jobs_pending", "query": pendingQuery}
	// what the registry does: a deadline per query (the provider timeout)
	get := func(p *Provider, metric, sel string) (map[string]int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		list, err := p.GetExternalMetric(ctx, "default", s, providers.ExternalMetricInfo{Metric: metric})
		if err != nil {
			return nil, err
		}
		out := map[string]int64{}
		for _, it := range list.Items {
			out[labels.Set(it.MetricLabels).String()] = it.Value.Value()
		}
		return out, nil
	}

	const n = 37
	mustExec(t, app, fmt.Sprintf("INSERT INTO jobs (queue) SELECT 'orders' FROM generate_series(1, %d)", n))
	mustExec(t, app, "INSERT INTO jobs (queue) SELECT 'mail' FROM generate_series(1, 5)")
	mustExec(t, app, "INSERT INTO jobs (queue, state) SELECT 'orders', 'done' FROM generate_series(1, 3)")
	psqlOrders := srv.psqlCount(t, password, "SELECT count(*) FROM jobs WHERE queue = 'orders' AND state = 'pending'")

	cold := newProv(t, "127.0.0.1", "metricscale", pwFile, "0s", pending)

	t.Run("values equal psql's count", func(t *testing.T) {
		got, err := get(cold, "postgresql_jobs_pending", "queue=orders")
		if err != nil {
			t.Fatal(err)
		}
		if got["queue=orders"] != n || psqlOrders != n || len(got) != 1 {
			t.Errorf("provider says %v, psql says %d, inserted %d", got, psqlOrders, n)
		}
		got, err = get(cold, "postgresql_jobs_pending", "")
		if err != nil || got["queue=mail"] != 5 || len(got) != 2 {
			t.Errorf("every queue: %v, %v; want orders=%d, mail=5", got, err, n)
		}
	})

	t.Run("row semantics on the real server", func(t *testing.T) {
		p := newProv(t, "127.0.0.1", "metricscale", pwFile, "0s",
			map[string]any{"name": "postgresql_null", "query": "SELECT queue, NULL::bigint AS value FROM jobs WHERE queue = 'mail' GROUP BY queue"},
			map[string]any{"name": "postgresql_null_as", "query": "SELECT queue, NULL::bigint AS value FROM jobs WHERE queue = 'mail' GROUP BY queue", "nullAs": 0},
			map[string]any{"name": "postgresql_none", "query": "SELECT queue, count(*) AS value FROM jobs WHERE queue = 'nope' GROUP BY queue"},
			map[string]any{"name": "postgresql_none_as", "query": "SELECT queue, count(*) AS value FROM jobs WHERE queue = 'nope' GROUP BY queue", "emptyAs": 0},
			map[string]any{"name": "postgresql_dup", "query": "SELECT queue, 1 AS value FROM jobs WHERE queue = 'mail'"},
			map[string]any{"name": "postgresql_text", "query": "SELECT '3'::text AS value"},
			map[string]any{"name": "postgresql_numeric", "query": "SELECT 'orders'::varchar AS queue, 2.5::numeric AS value, now()::date AS day"},
		)
		for _, tc := range []struct {
			metric string
			want   map[string]int64
			reason providers.Reason
			msg    string
		}{
			{"postgresql_null", nil, providers.ReasonBackend, `row 1 {queue="mail"}: the value column "value" is NULL`},
			{"postgresql_null_as", map[string]int64{"queue=mail": 0}, "", ""},
			{"postgresql_none", nil, providers.ReasonNoValue, "postgresql_none"},
			{"postgresql_none_as", map[string]int64{"": 0}, "", ""},
			{"postgresql_dup", nil, providers.ReasonBackend, `rows 1 and 2 have the same labels {queue="mail"}`},
			{"postgresql_text", nil, providers.ReasonBackend, `value column "value" is of type text, not a number`},
		} {
			got, err := get(p, tc.metric, "")
			switch {
			case tc.msg == "" && (err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want)):
				t.Errorf("%s: %v, %v; want %v", tc.metric, got, err, tc.want)
			case tc.msg != "" && (err == nil || providers.ReasonOf(err) != tc.reason || !strings.Contains(err.Error(), tc.msg)):
				t.Errorf("%s: %v, %v; want a %s error saying %s", tc.metric, got, err, tc.reason, tc.msg)
			}
		}
		// numeric read exactly, labels as PostgreSQL prints them
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		list, err := p.GetExternalMetric(ctx, "default", labels.Everything(), providers.ExternalMetricInfo{Metric: "postgresql_numeric"})
		if err != nil {
			t.Fatal(err)
		}
		it := list.Items[0]
		if it.Value.MilliValue() != 2500 || it.MetricLabels["queue"] != "orders" || len(it.MetricLabels["day"]) != len("2006-01-02") {
			t.Errorf("numeric: %v %v", it.Value.String(), it.MetricLabels)
		}
	})

	t.Run("a write in a query is refused by the read-only transaction", func(t *testing.T) {
		// as the superuser, through the socket: no privilege stops the
		// DELETE, only the transaction
		p := newProvWith(t, map[string]any{"allowSuperuser": true}, srv.data, "postgres", "", "0s",
			map[string]any{"name": "postgresql_write", "query": "WITH d AS (DELETE FROM jobs RETURNING id) SELECT count(*) AS value FROM d"})
		_, err := get(p, "postgresql_write", "")
		if err == nil || providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), "read-only transaction") {
			t.Errorf("want a 503 saying the transaction is read-only, got %v", err)
		}
		if c := srv.psqlCount(t, password, "SELECT count(*) FROM jobs"); c != n+5+3 {
			t.Errorf("jobs has %d rows after the refused DELETE, want %d", c, n+5+3)
		}
	})

	t.Run("session state does not outlive a read", func(t *testing.T) {
		// a session advisory lock survives the ROLLBACK; only a reset of
		// the pooled connection releases it
		p := newProv(t, "127.0.0.1", "metricscale", pwFile, "0s",
			map[string]any{"name": "postgresql_locks", "query": "SELECT pg_backend_pid() AS pid, 1 AS value FROM (SELECT pg_advisory_lock(4242), pg_advisory_lock(4343)) l"})
		var pids []string
		for i := 0; i < 2; i++ {
			got, err := get(p, "postgresql_locks", "")
			if err != nil || len(got) != 1 {
				t.Fatalf("read %d: %v, %v", i, got, err)
			}
			for k := range got {
				pids = append(pids, strings.TrimPrefix(k, "pid="))
			}
		}
		var locks, alive int
		if err := su.QueryRow(context.Background(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").Scan(&locks); err != nil {
			t.Fatal(err)
		}
		if err := su.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid::text = $1", pids[1]).Scan(&alive); err != nil {
			t.Fatal(err)
		}
		if locks != 0 {
			t.Errorf("%d advisory locks held after the reads, want 0", locks)
		}
		if pids[0] != pids[1] || alive != 1 {
			t.Errorf("backends %v, the last alive: %d; want one connection, reused and still open (its locks released by the reset, not by a close)", pids, alive)
		}
	})

	t.Run("a superuser is refused unless allowed", func(t *testing.T) {
		mustExec(t, su, "CREATE ROLE sidekick LOGIN")
		mustExec(t, su, "GRANT postgres TO sidekick")
		mustExec(t, su, "GRANT CONNECT ON DATABASE app TO sidekick")
		one := map[string]any{"name": "postgresql_one", "query": "SELECT 1 AS value"}
		for _, tc := range []struct {
			user, want string
		}{
			{"postgres", `role "postgres" is a superuser, refused`},
			{"sidekick", `role "sidekick" is a member of the superuser role(s) postgres, refused`},
		} {
			// through the socket, trusted: no password needed
			_, err := get(newProv(t, srv.data, tc.user, "", "0s", one), "postgresql_one", "")
			if err == nil || providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "allowSuperuser") {
				t.Errorf("%s: want a 503 saying %q, got %v", tc.user, tc.want, err)
			}
			got, err := get(newProvWith(t, map[string]any{"allowSuperuser": true}, srv.data, tc.user, "", "0s", one), "postgresql_one", "")
			if err != nil || got[""] != 1 {
				t.Errorf("%s with allowSuperuser: %v, %v; want the value", tc.user, got, err)
			}
		}
	})

	t.Run("rows and label bytes are bounded", func(t *testing.T) {
		p := newProv(t, "127.0.0.1", "metricscale", pwFile, "0s",
			map[string]any{"name": "postgresql_wide", "query": "SELECT g AS id, repeat('x', 20000) AS pad, 1 AS value FROM generate_series(1, 9999) g"},
			map[string]any{"name": "postgresql_long", "query": "SELECT g AS id, 1 AS value FROM generate_series(1, 10001) g"},
			map[string]any{"name": "postgresql_fits", "query": "SELECT g AS id, repeat('x', 380) AS pad, 1 AS value FROM generate_series(1, 10000) g"},
		)
		for _, tc := range []struct{ metric, want string }{
			{"postgresql_wide", "more than 4 MiB of labels and values"},
			{"postgresql_long", "more than 10000 rows"},
		} {
			_, err := get(p, tc.metric, "")
			if err == nil || providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), "reading "+tc.metric+":") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: want a 503 naming the metric and saying %q, got %v", tc.metric, tc.want, err)
			}
		}
		if got, err := get(p, "postgresql_fits", ""); err != nil || len(got) != 10000 {
			t.Errorf("10,000 rows of 400 bytes: %d series, %v; want all", len(got), err)
		}
	})

	t.Run("a slow query is cut by statement_timeout", func(t *testing.T) {
		p := newProv(t, "127.0.0.1", "metricscale", pwFile, "0s",
			map[string]any{"name": "postgresql_slow", "query": "SELECT 1 AS value FROM (SELECT pg_sleep(10)) s"})
		start := time.Now()
		_, err := get(p, "postgresql_slow", "")
		took := time.Since(start)
		if err == nil || providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), "statement timeout") {
			t.Errorf("want a 503 saying the statement timed out, got %v", err)
		}
		if took > 2*time.Second {
			t.Errorf("took %s, more than the query's 2s timeout", took)
		}
		// the connection survived: the next query answers
		if _, err := get(cold, "postgresql_jobs_pending", "queue=orders"); err != nil {
			t.Error(err)
		}
	})

	t.Run("a wrong password is a 503 that does not show it", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "password")
		const wrong = "wrong-Pa55word-also-never-shown"
		if err := os.WriteFile(bad, []byte(wrong), 0o600); err != nil {
			t.Fatal(err)
		}
		p := newProv(t, "127.0.0.1", "metricscale", bad, "0s", pending)
		_, err := get(p, "postgresql_jobs_pending", "")
		if err == nil || providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), "password authentication failed") {
			t.Errorf("want a 503 saying authentication failed, got %v", err)
		}
		if err != nil && (strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), password)) {
			t.Errorf("the error shows a password: %v", err)
		}
	})

	t.Run("1000 queries within one TTL cost one SQL query", func(t *testing.T) {
		warm := newProv(t, "127.0.0.1", "metricscale", pwFile, "1m", pending)
		// the one SQL query; the 1000 below are warm
		if _, err := get(warm, "postgresql_jobs_pending", "queue=orders"); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		errs := make(chan error, 1000)
		for w := 0; w < 10; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 100; i++ {
					start := time.Now()
					got, err := get(warm, "postgresql_jobs_pending", "queue=orders")
					d := time.Since(start)
					if err == nil && got["queue=orders"] != n {
						err = fmt.Errorf("got %v", got)
					}
					if err != nil {
						errs <- err
					}
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
			break
		}
		if calls := warm.BackendCalls(); calls != 1 {
			t.Errorf("1001 queries within one TTL made %d SQL queries, want 1", calls)
		}
		coldLat := make([]time.Duration, 0, 200)
		before := cold.BackendCalls()
		for i := 0; i < 200; i++ {
			start := time.Now()
			if _, err := get(cold, "postgresql_jobs_pending", "queue=orders"); err != nil {
				t.Fatal(err)
			}
			coldLat = append(coldLat, time.Since(start))
		}
		if calls := cold.BackendCalls() - before; calls != 200 {
			t.Errorf("200 sequential queries without a cache made %d SQL queries, want 200", calls)
		}
		t.Logf("1001 API queries within one TTL: %d SQL query; p99 of a query with the cache warm %s (1000 queries, 10 clients), cold %s (200 sequential, each a read-only transaction)",
			warm.BackendCalls(), p99(lat), p99(coldLat))
	})

	t.Run("server down is a fast 503, restart recovers", func(t *testing.T) {
		srv.stop(t)
		start := time.Now()
		got, err := get(cold, "postgresql_jobs_pending", "queue=orders")
		took := time.Since(start)
		if err == nil {
			t.Fatalf("server down: got %v, want a 503", got)
		}
		if r := providers.ReasonOf(err); r != providers.ReasonBackend {
			t.Errorf("reason %s, want %s: %v", r, providers.ReasonBackend, err)
		}
		var pe *providers.Error
		if !errors.As(err, &pe) || pe.Code() != 503 || !strings.Contains(err.Error(), `"pg-it"`) {
			t.Errorf("want a 503 naming the provider pg-it, got %v", err)
		}
		if strings.Contains(err.Error(), password) {
			t.Errorf("the error shows the password: %v", err)
		}
		if took > 2*time.Second {
			t.Errorf("took %s, more than the query's 2s timeout", took)
		}
		t.Logf("server down: %v (after %s)", err, took)

		srv.start(t)
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err = get(cold, "postgresql_jobs_pending", "queue=orders")
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil || got["queue=orders"] != n {
			t.Errorf("after the restart: %v, %v; want orders=%d", got, err, n)
		}
	})
}

func p99(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)*99)/100]
}
