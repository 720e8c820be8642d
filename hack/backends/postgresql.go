package backends

// PostgreSQL, Debian's postgresql on 127.0.0.1:15432. Start initializes the data once under
// DIR/postgresql, starts the server when it does not run, and (re)applies the schema:
// database e2e, table jobs(id serial, queue text, state text), and two roles whose
// passwords it writes under DIR/postgresql (mode 0600):
//   - metricscale (DIR/postgresql/password): the adapter's, least privilege — LOGIN,
//     CONNECT on e2e, USAGE on schema public, SELECT on jobs,
//     default_transaction_read_only on;
//   - e2e_writer (DIR/postgresql/writer-password): the tests' and the demo's, owner of jobs.
// The superuser postgres logs in only through the unix socket, which lives in the data
// directory (peer authentication: run psql as the postgres user).
//
// initdb and postgres refuse to run as root: as root, the server runs as the `postgres`
// system user the package created, and its data must be reachable by that user. When DIR
// is not (it lies under a 0700 home such as /root), the data goes to
// /var/tmp/metricscale-postgresql-<id> and DIR/postgresql/server links to it.
//
// Environment: METRICSCALE_POSTGRESQL_BIN (the server's bin directory, default the newest
// /usr/lib/postgresql/*/bin).

import (
	"context"
	_ "embed"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed postgresql.yaml
var postgresqlFragment []byte

const (
	pgPort     = 15432
	pgDatabase = "e2e"
	pgRole     = "metricscale"
	pgWriter   = "e2e_writer"
	pgWait     = 60 * time.Second
	// pgQueue is the queue column's value of the e2e rows of table jobs, whose pending rows
	// postgresql.yaml counts as postgresql_jobs_pending.
	pgQueue = "e2e-jobs"
)

type postgresqlBackend struct{}

func init() { register(postgresqlBackend{}) }

func (postgresqlBackend) Name() string { return "postgresql" }

// pgBin is the server's bin directory: the newest installed major version.
func pgBin() string {
	if v := os.Getenv("METRICSCALE_POSTGRESQL_BIN"); v != "" {
		return v
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	best, bestVersion := "/usr/lib/postgresql/15/bin", -1
	for _, d := range dirs {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err == nil && v > bestVersion && executable(filepath.Join(d, "postgres")) {
			best, bestVersion = d, v
		}
	}
	return best
}

// asPG is argv run as the postgres user when we are root (initdb and postgres refuse
// root), as ourselves otherwise.
func asPG(argv ...string) []string {
	if os.Geteuid() == 0 {
		return append([]string{"runuser", "-u", "postgres", "--"}, argv...)
	}
	return argv
}

func runPG(ctx context.Context, stdin io.Reader, argv ...string) ([]byte, error) {
	a := asPG(argv...)
	return run(ctx, nil, stdin, a[0], a[1:]...)
}

func (postgresqlBackend) Install(ctx context.Context, cacheRoot string, log io.Writer) error {
	bin := pgBin()
	if allExecutable([]string{filepath.Join(bin, "postgres"), filepath.Join(bin, "initdb")}) {
		return nil
	}
	// (its service would take port 5432); the version, so the bin directory, is known after
	err := aptInstall(ctx, "postgresql", "postgresql", cacheRoot, log, filepath.Join(bin, "postgres"))
	bin = pgBin()
	if m := missing([]string{filepath.Join(bin, "postgres")}); m != "" {
		if err == nil {
			err = fmt.Errorf("%s is missing after installing postgresql", m)
		}
		return err
	}
	out, _ := run(ctx, nil, nil, filepath.Join(bin, "postgres"), "--version")
	fmt.Fprintf(log, "    installed %s\n", strings.TrimSpace(string(out)))
	return nil
}

// pgLayout is where a state folder keeps PostgreSQL's files.
type pgLayout struct {
	dir                      string // DIR/postgresql: the password files, initdb's and the schema's logs
	server                   string // the postgres user's: data, log; DIR/postgresql/server or its link's target
	data                     string
	logfile                  string
	password, writerPassword string
}

func pgFiles(dir string) pgLayout {
	p := filepath.Join(mustAbs(dir), "postgresql")
	l := pgLayout{dir: p, password: filepath.Join(p, "password"), writerPassword: filepath.Join(p, "writer-password")}
	l.setServer(filepath.Join(p, "server"))
	return l
}

// setServer follows server's link: the postgres user cannot take the path through DIR.
func (l *pgLayout) setServer(server string) {
	if target, err := os.Readlink(server); err == nil {
		server = target
	}
	l.server, l.data, l.logfile = server, filepath.Join(server, "data"), filepath.Join(server, "postgresql.log")
}

// makeServerDir creates the server folder, owned by the user the server runs as.
func (l *pgLayout) makeServerDir(ctx context.Context) error {
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return err
	}
	link := filepath.Join(l.dir, "server")
	if _, err := os.Lstat(link); err == nil {
		return nil
	}
	if os.Geteuid() != 0 {
		return os.Mkdir(link, 0o700)
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("there is no postgres user (Debian's postgresql package creates it: install the backend): %w", err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	if _, err := run(ctx, nil, nil, "runuser", "-u", "postgres", "--", "test", "-x", l.dir); err == nil {
		if err := os.Mkdir(link, 0o700); err != nil {
			return err
		}
		return os.Chown(link, uid, gid)
	}
	h := fnv.New32a()
	h.Write([]byte(filepath.Dir(l.dir)))
	elsewhere := fmt.Sprintf("/var/tmp/metricscale-postgresql-%d", h.Sum32())
	if err := os.MkdirAll(elsewhere, 0o700); err != nil {
		return err
	}
	if err := os.Chown(elsewhere, uid, gid); err != nil {
		return err
	}
	if err := os.Symlink(elsewhere, link); err != nil {
		return err
	}
	l.setServer(link)
	return nil
}

func (l pgLayout) running(ctx context.Context) bool {
	if _, err := os.Stat(filepath.Join(l.data, "postmaster.pid")); err != nil {
		return false
	}
	_, err := runPG(ctx, nil, filepath.Join(pgBin(), "pg_ctl"), "-D", l.data, "status")
	return err == nil
}

func (postgresqlBackend) Start(ctx context.Context, dir string, log io.Writer) error {
	if _, err := absDir(dir); err != nil {
		return err
	}
	bin := pgBin()
	if err := needBins("postgresql", filepath.Join(bin, "initdb"), filepath.Join(bin, "pg_ctl")); err != nil {
		return err
	}
	l := pgFiles(dir)
	if err := l.makeServerDir(ctx); err != nil {
		return fmt.Errorf("postgresql: the server folder in %s: %w", l.dir, err)
	}
	if _, err := os.Stat(filepath.Join(l.data, "PG_VERSION")); err != nil {
		if err := l.initdb(ctx, log); err != nil {
			return err
		}
	}
	if !l.running(ctx) {
		if err := portsFree("PostgreSQL in "+l.data, pgPort); err != nil {
			return err
		}
		if _, err := runPG(ctx, nil, filepath.Join(bin, "pg_ctl"), "-D", l.data, "-l", l.logfile, "-w",
			"-t", strconv.Itoa(int(pgWait.Seconds())), "start"); err != nil {
			return fmt.Errorf("postgresql did not start within %s (log: %s): %w\n%s", pgWait, l.logfile, err, tail(l.logfile, 20))
		}
	}
	ready := func() bool {
		_, err := run(ctx, nil, nil, filepath.Join(bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(pgPort))
		return err == nil
	}
	if err := waitUntil(ctx, pgWait, ready); err != nil {
		return fmt.Errorf("postgresql on 127.0.0.1:%d is not ready after %s (log: %s): %w", pgPort, pgWait, l.logfile, err)
	}
	if err := l.setupSchema(ctx); err != nil {
		return err
	}
	version, _ := run(ctx, nil, nil, filepath.Join(bin, "postgres"), "--version")
	v := ""
	if f := strings.Fields(string(version)); len(f) > 2 {
		v = f[2] + " "
	}
	fmt.Fprintf(log, "    PostgreSQL %son 127.0.0.1:%d, database %s (data %s)\n", v, pgPort, pgDatabase, l.data)
	return nil
}

// initdb initializes the data folder, for a throwaway test server: no durability needed,
// as little memory as possible.
func (l pgLayout) initdb(ctx context.Context, log io.Writer) error {
	fmt.Fprintf(log, "    initdb %s\n", l.data)
	_ = os.RemoveAll(l.data)
	logPath := filepath.Join(l.dir, "initdb.log")
	out, err := runPG(ctx, nil, filepath.Join(pgBin(), "initdb"), "-D", l.data, "-U", "postgres", "-E", "UTF8", "--no-locale",
		"--auth-local=peer", "--auth-host=scram-sha-256")
	_ = os.WriteFile(logPath, out, 0o644)
	if err != nil {
		return fmt.Errorf("initdb failed (full log: %s): %w", logPath, err)
	}
	conf := fmt.Sprintf(`# written by metricscale hack/backends (postgresql)
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 40
shared_buffers = 16MB
fsync = off
synchronous_commit = off
full_page_writes = off
`, pgPort, l.data)
	// appending keeps the file the postgres user's
	f, err := os.OpenFile(filepath.Join(l.data, "postgresql.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("postgresql: %w", err)
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return fmt.Errorf("postgresql: %w", err)
	}
	return f.Close()
}

// setupSchema (re)applies the database, the table, the roles and their grants.
func (l pgLayout) setupSchema(ctx context.Context) error {
	for _, f := range []string{l.password, l.writerPassword} {
		if err := newPassword(f, 24); err != nil {
			return err
		}
	}
	rolePW, err := os.ReadFile(l.password)
	if err != nil {
		return err
	}
	writerPW, err := os.ReadFile(l.writerPassword)
	if err != nil {
		return err
	}
	// The passwords go through stdin, never on a command line.
	script := fmt.Sprintf(`\set role_pw %s
\set writer_pw %s
SELECT 'CREATE DATABASE %[3]s' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '%[3]s')\gexec
SELECT 'CREATE ROLE %[4]s' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%[4]s')\gexec
SELECT 'CREATE ROLE %[5]s' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%[5]s')\gexec
ALTER ROLE %[4]s WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS CONNECTION LIMIT 10 PASSWORD :'role_pw';
ALTER ROLE %[4]s SET default_transaction_read_only = on;
ALTER ROLE %[5]s WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'writer_pw';
REVOKE ALL ON DATABASE %[3]s FROM PUBLIC;
REVOKE CONNECT ON DATABASE postgres FROM PUBLIC;
GRANT CONNECT ON DATABASE %[3]s TO %[4]s, %[5]s;
\connect %[3]s
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO %[4]s, %[5]s;
CREATE TABLE IF NOT EXISTS jobs (id serial PRIMARY KEY, queue text NOT NULL, state text NOT NULL DEFAULT 'pending');
CREATE INDEX IF NOT EXISTS jobs_queue_state ON jobs (queue, state);
ALTER TABLE jobs OWNER TO %[5]s;
REVOKE ALL ON jobs FROM %[4]s;
GRANT SELECT ON jobs TO %[4]s;
`, strings.TrimSpace(string(rolePW)), strings.TrimSpace(string(writerPW)), pgDatabase, pgRole, pgWriter)
	logPath := filepath.Join(l.dir, "setup.log")
	// the superuser, through the socket in the data directory
	out, err := runPG(ctx, strings.NewReader(script), filepath.Join(pgBin(), "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
		"-h", l.data, "-p", strconv.Itoa(pgPort), "-U", "postgres", "-d", "postgres")
	_ = os.WriteFile(logPath, out, 0o600)
	if err != nil {
		return fmt.Errorf("setting up database %s failed (full log: %s): %w", pgDatabase, logPath, err)
	}
	return nil
}

func (postgresqlBackend) Stop(ctx context.Context, dir string) error {
	if _, err := absDir(dir); err != nil {
		return err
	}
	l := pgFiles(dir)
	if _, err := os.Stat(filepath.Join(l.data, "PG_VERSION")); err == nil && l.running(ctx) {
		if _, err := runPG(ctx, nil, filepath.Join(pgBin(), "pg_ctl"), "-D", l.data, "-m", "fast", "-w",
			"-t", strconv.Itoa(int(pgWait.Seconds())), "stop"); err != nil {
			return fmt.Errorf("postgresql in %s did not stop within %s (log: %s): %w", l.data, pgWait, l.logfile, err)
		}
	}
	if err := waitPortsClosed(ctx, pgWait, pgPort); err != nil {
		return fmt.Errorf("port %d is still open %s after stopping PostgreSQL in %s: %w", pgPort, pgWait, l.data, err)
	}
	return nil
}

func (postgresqlBackend) Healthy(ctx context.Context, dir string) error {
	l := pgFiles(dir)
	if !l.running(ctx) {
		return fmt.Errorf("the PostgreSQL server of %s does not run", l.data)
	}
	if _, err := run(ctx, nil, nil, filepath.Join(pgBin(), "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(pgPort)); err != nil {
		return fmt.Errorf("postgresql on 127.0.0.1:%d is not ready: %w", pgPort, err)
	}
	return nil
}

func (postgresqlBackend) Env(dir string) map[string]string {
	l := pgFiles(dir)
	return map[string]string{
		"METRICSCALE_POSTGRESQL_HOST":                 "127.0.0.1",
		"METRICSCALE_POSTGRESQL_PORT":                 strconv.Itoa(pgPort),
		"METRICSCALE_POSTGRESQL_DATABASE":             pgDatabase,
		"METRICSCALE_POSTGRESQL_USER":                 pgRole,
		"METRICSCALE_POSTGRESQL_PASSWORD_FILE":        l.password,
		"METRICSCALE_POSTGRESQL_WRITER":               pgWriter,
		"METRICSCALE_POSTGRESQL_WRITER_PASSWORD_FILE": l.writerPassword,
		"METRICSCALE_POSTGRESQL_PSQL":                 filepath.Join(pgBin(), "psql"),
		"METRICSCALE_POSTGRESQL_DATA":                 l.data,
	}
}

func (postgresqlBackend) AdapterConfig(dir string) ([]byte, error) {
	return adapterConfig(postgresqlFragment, dir)
}

func (postgresqlBackend) Queue() QueueInfo {
	return QueueInfo{Metric: "postgresql_jobs_pending", Selector: map[string]string{"queue": pgQueue}}
}

type postgresqlQueue struct {
	c   *pgx.Conn
	env map[string]string
}

// OpenQueue connects as the writer role, which owns jobs (the adapter's may only read it),
// and makes sure the queue has a row, so that the metric has a series (0) before the first
// job.
func (postgresqlBackend) OpenQueue(ctx context.Context, env map[string]string) (Queue, error) {
	var v [4]string
	for i, k := range []string{"METRICSCALE_POSTGRESQL_HOST", "METRICSCALE_POSTGRESQL_PORT", "METRICSCALE_POSTGRESQL_DATABASE", "METRICSCALE_POSTGRESQL_WRITER"} {
		var err error
		if v[i], err = need(env, k); err != nil {
			return nil, fmt.Errorf("postgresql: %w", err)
		}
	}
	pw, err := readSecret(env, "METRICSCALE_POSTGRESQL_WRITER_PASSWORD_FILE")
	if err != nil {
		return nil, fmt.Errorf("postgresql: %w", err)
	}
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s dbname=%s user=%s sslmode=disable", v[0], v[1], v[2], v[3]))
	if err != nil {
		return nil, fmt.Errorf("postgresql: %w", err)
	}
	cfg.Password = pw
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgresql: connecting as %s: %w", cfg.User, err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO jobs (queue, state) SELECT $1, 'done' WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE queue = $1)", pgQueue); err != nil {
		c.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("postgresql: queue %s: %w", pgQueue, err)
	}
	return &postgresqlQueue{c: c, env: env}, nil
}

func (q *postgresqlQueue) Publish(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	if _, err := q.c.Exec(ctx, "INSERT INTO jobs (queue, state) SELECT $1, 'pending' FROM generate_series(1, $2::int)", pgQueue, n); err != nil {
		return fmt.Errorf("postgresql: inserting %d jobs: %w", n, err)
	}
	return nil
}

// Consume marks the oldest pending rows done; SKIP LOCKED is how concurrent workers would
// each take their own.
func (q *postgresqlQueue) Consume(ctx context.Context, n int) (int, error) {
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

// Depth is psql's count of pending rows, as the adapter's role sees it.
func (q *postgresqlQueue) Depth(ctx context.Context) (int, error) {
	pw, err := readSecret(q.env, "METRICSCALE_POSTGRESQL_PASSWORD_FILE")
	if err != nil {
		return 0, fmt.Errorf("postgresql: %w", err)
	}
	args := []string{"-X", "-tA", "-h", q.env["METRICSCALE_POSTGRESQL_HOST"], "-p", q.env["METRICSCALE_POSTGRESQL_PORT"],
		"-U", q.env["METRICSCALE_POSTGRESQL_USER"], "-d", q.env["METRICSCALE_POSTGRESQL_DATABASE"],
		"-c", "SELECT count(*) FROM jobs WHERE queue = '" + pgQueue + "' AND state = 'pending'"}
	out, err := run(ctx, []string{"PGPASSWORD=" + pw}, nil, q.env["METRICSCALE_POSTGRESQL_PSQL"], args...)
	if err != nil {
		return 0, fmt.Errorf("postgresql: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, fmt.Errorf("postgresql: psql printed %q", out)
	}
	return n, nil
}

// Drain marks the pending rows done, not deleted: the queue keeps its row in the metric's
// GROUP BY, so it reads 0 (and the autoscaler scales back) instead of disappearing.
func (q *postgresqlQueue) Drain(ctx context.Context) error {
	if _, err := q.c.Exec(ctx, "UPDATE jobs SET state = 'done' WHERE queue = $1 AND state = 'pending'", pgQueue); err != nil {
		return fmt.Errorf("postgresql: emptying queue %s: %w", pgQueue, err)
	}
	return nil
}

func (q *postgresqlQueue) Close() error { return q.c.Close(context.Background()) }
