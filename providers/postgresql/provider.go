// Package postgresql serves external metrics read by named read-only SQL
// queries: each row of a query is one series, its value column the value
// and every other column a label. See README.md.
package postgresql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/external_metrics"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/options"
)

// Type is the provider type in the adapter config.
const Type = "postgresql"

// Factory builds postgresql providers.
type Factory struct{}

// Validate implements providers.Factory: it checks every option, the
// queries' text included, without connecting.
func (Factory) Validate(field string, raw json.RawMessage) error {
	_, err := decodeOptions(field, raw)
	return err
}

// New implements providers.Factory. It does not connect: the first read
// does, so discovery works while the server is down.
func (Factory) New(name string, raw json.RawMessage, deps providers.Deps) (providers.Provider, error) {
	s, err := decodeOptions("options", raw)
	if err != nil {
		return nil, err
	}
	q, err := newPGQuerier(name, s)
	if err != nil {
		return nil, err
	}
	return newProvider(name, s, deps, q)
}

// Provider serves the configured queries' results as external metrics.
type Provider struct {
	*ondemand.Provider
	q querier
}

var _ providers.ExternalProvider = (*Provider)(nil)

func newProvider(name string, s *settings, deps providers.Deps, q querier) (*Provider, error) {
	metrics := make([]ondemand.Metric, 0, len(s.metrics))
	for i := range s.metrics {
		m := &s.metrics[i]
		om := m.Metric(func(ctx context.Context) ([]ondemand.Series, error) {
			res, err := q.query(ctx, m.query)
			if err != nil {
				return nil, err
			}
			series, err := toSeries(m, res)
			if err != nil {
				klog.V(2).InfoS("Query result refused", "provider", name, "metric", m.Name, "err", err)
			}
			return series, err
		})
		om.AllowNegative = m.allowNegative
		metrics = append(metrics, om)
	}
	p, err := ondemand.New(name, metrics, ondemand.Options{
		CacheTTL: s.cacheTTL,
		// a read without a deadline: one connection attempt and the statement
		Timeout: s.connectTimeout + s.statementTimeout + time.Second,
		Clock:   deps.Clock,
		Changes: deps.Changes,
		Feed:    s.feed,
	})
	if err != nil {
		return nil, err
	}
	return &Provider{Provider: p, q: q}, nil
}

// GetExternalMetric implements providers.ExternalProvider. A query whose
// context is already done gets an error, never a reading a concurrent
// load may just have finished (ondemand's wait races the two).
func (p *Provider) GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info providers.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	if err := ctx.Err(); err != nil {
		return nil, providers.NewBackendError(p.Name(), fmt.Errorf("reading %s: %w", info.Metric, err))
	}
	return p.Provider.GetExternalMetric(ctx, namespace, metricSelector, info)
}

// Close closes the idle connections.
func (p *Provider) Close() error {
	if c, ok := p.q.(interface{ close() }); ok {
		c.close()
	}
	return nil
}

// pgQuerier runs queries on a real server.
type pgQuerier struct {
	provider         string
	base             *pgx.ConnConfig
	password         *options.Secret
	lastPassword     atomic.Pointer[string] // for redaction
	statementTimeout time.Duration
	allowSuperuser   bool
	pool             *connPool
}

// deadlineMargin keeps the statement timeout below the query's deadline:
// the server then cuts the statement and says why, and the connection
// stays usable.
const deadlineMargin = 100 * time.Millisecond

func newPGQuerier(name string, s *settings) (*pgQuerier, error) {
	base, err := connConfig(s)
	if err != nil {
		return nil, err
	}
	q := &pgQuerier{provider: name, base: base, password: s.Password, statementTimeout: s.statementTimeout, allowSuperuser: s.AllowSuperuser}
	if _, err := q.readPassword(); err != nil {
		// not fatal: a Secret mounted later (or rotated) is read at each connect
		klog.InfoS("PostgreSQL password not readable yet", "provider", name, "err", err)
	}
	q.pool = newConnPool(s.maxConns, q.connect)
	return q, nil
}

func (q *pgQuerier) readPassword() (string, error) {
	pw, err := q.password.Value("options.password")
	if err == nil {
		q.lastPassword.Store(&pw)
	}
	return pw, err
}

func (q *pgQuerier) redact(err error) error {
	if pw := q.lastPassword.Load(); pw != nil {
		return options.Redact(err, *pw)
	}
	return err
}

func (q *pgQuerier) connect(ctx context.Context) (*pgx.Conn, error) {
	pw, err := q.readPassword()
	if err != nil {
		return nil, err
	}
	cfg := q.base.Copy()
	cfg.Password = pw
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, options.Redact(err, pw)
	}
	if !q.allowSuperuser {
		if err := refuseSuperuser(ctx, c); err != nil {
			closeConn(c)
			return nil, err
		}
	}
	return c, nil
}

// superuserQuery names the role logged in, whether it is a superuser, and
// the superuser roles it is a member of (it could SET ROLE to them, from a
// query too: set_config('role', ...)).
const superuserQuery = `SELECT current_user::text, r.rolsuper,
	(SELECT string_agg(s.rolname, ', ' ORDER BY s.rolname) FROM pg_roles s
	 WHERE s.rolsuper AND s.oid <> r.oid AND pg_has_role(r.oid, s.oid, 'MEMBER'))
FROM pg_roles r WHERE r.rolname = current_user`

// refuseSuperuser fails for a role that is a superuser or may become one:
// a READ ONLY transaction does not stop a superuser's query from
// terminating backends or reading the server's files.
func refuseSuperuser(ctx context.Context, c *pgx.Conn) error {
	var user string
	var super bool
	var via *string
	if err := c.QueryRow(ctx, superuserQuery, pgx.QueryExecModeSimpleProtocol).Scan(&user, &super, &via); err != nil {
		return fmt.Errorf("checking that the role is not a superuser: %w", err)
	}
	const hint = "connect as a role with CONNECT and SELECT only (providers/postgresql/README.md), or set options.allowSuperuser"
	switch {
	case super:
		return fmt.Errorf("role %q is a superuser, refused: %s", user, hint)
	case via != nil:
		return fmt.Errorf("role %q is a member of the superuser role(s) %s, refused: %s", user, *via, hint)
	}
	return nil
}

func (q *pgQuerier) close() { q.pool.close() }

func (q *pgQuerier) query(ctx context.Context, sql string) (*result, error) {
	res, err := q.try(ctx, sql, false)
	var stale *staleConnError
	if errors.As(err, &stale) {
		// an idle connection the server dropped (a restart): one new try
		res, err = q.try(ctx, sql, true)
	}
	return res, q.redact(err)
}

// staleConnError is a reused connection that failed before the query
// was sent.
type staleConnError struct{ err error }

func (e *staleConnError) Error() string { return e.err.Error() }
func (e *staleConnError) Unwrap() error { return e.err }

func (q *pgQuerier) try(ctx context.Context, sql string, fresh bool) (_ *result, err error) {
	conn, reused, err := q.pool.acquire(ctx, fresh)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() { q.pool.release(conn, ok) }()
	st := q.statementTimeout
	if dl, has := ctx.Deadline(); has {
		st = min(st, max(time.Until(dl)-deadlineMargin, time.Millisecond))
	}
	begin := "BEGIN READ ONLY; SET LOCAL statement_timeout = " + strconv.FormatInt(max(st.Milliseconds(), 1), 10)
	if _, err := conn.Exec(ctx, begin); err != nil {
		if reused && ctx.Err() == nil && conn.IsClosed() {
			return nil, &staleConnError{err}
		}
		return nil, fmt.Errorf("starting a read-only transaction: %w", err)
	}
	res, qerr := readRows(ctx, conn, sql)
	// never commit: the transaction only read
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		return nil, errors.Join(qerr, fmt.Errorf("ending the transaction: %w", err))
	}
	// what a query can leave beyond its transaction (session advisory
	// locks, a prepared statement or a cursor made by a function) goes
	// before the connection is reused; on failure the connection is closed
	if _, err := conn.Exec(ctx, "DISCARD ALL"); err != nil {
		return nil, errors.Join(qerr, fmt.Errorf("resetting the session: %w", err))
	}
	ok = true
	return res, qerr
}

func readRows(ctx context.Context, conn *pgx.Conn, sql string) (*result, error) {
	// text format: labels read as PostgreSQL (and psql) print them; an
	// unnamed statement, as DISCARD ALL drops named ones
	rows, err := conn.Query(ctx, sql, pgx.QueryExecModeExec, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	res := &result{}
	for _, fd := range rows.FieldDescriptions() {
		c := column{name: fd.Name, typeOID: fd.DataTypeOID}
		if t, ok := conn.TypeMap().TypeForOID(fd.DataTypeOID); ok {
			c.typeName = t.Name
		}
		res.columns = append(res.columns, c)
	}
	size := 0
	for rows.Next() {
		if len(res.rows) >= maxRows {
			return nil, fmt.Errorf("the query returned more than %d rows, the most one reading holds: aggregate, or add a LIMIT", maxRows)
		}
		raw := rows.RawValues()
		row := make([]*string, len(raw))
		for i, b := range raw {
			size += len(b)
			if size > maxResultBytes {
				return nil, fmt.Errorf("the query's rows hold more than %d MiB of labels and values (at row %d), the most one reading holds: select fewer or shorter label columns",
					maxResultBytes>>20, len(res.rows)+1)
			}
			if b != nil {
				s := string(b)
				row[i] = &s
			}
		}
		res.rows = append(res.rows, row)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

// connConfig is the connection's config without the password, which is
// read at each connect. Every setting is explicit, so PG* environment
// variables of the adapter's process do not change where it connects.
func connConfig(s *settings) (*pgx.ConnConfig, error) {
	kv := [][2]string{
		{"host", s.Host},
		{"port", strconv.Itoa(s.Port)},
		{"dbname", s.Database},
		{"user", s.User},
		{"sslmode", s.sslMode},
		{"application_name", "metricscale-adapter"},
	}
	if t := s.TLS; t != nil {
		// checked here so the error names the field; pgx reads them again
		if _, err := t.Config("options.tls"); err != nil {
			return nil, err
		}
		for k, v := range map[string]string{"sslrootcert": t.CAFile, "sslcert": t.CertFile, "sslkey": t.KeyFile} {
			if v != "" {
				kv = append(kv, [2]string{k, v})
			}
		}
	}
	var b strings.Builder
	for _, p := range kv {
		fmt.Fprintf(&b, "%s='%s' ", p[0], strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(p[1]))
	}
	cfg, err := pgx.ParseConfig(b.String())
	if err != nil {
		return nil, fmt.Errorf("options: %w", err)
	}
	cfg.Password = ""
	cfg.ConnectTimeout = s.connectTimeout
	if s.TLS != nil && s.TLS.ServerName != "" {
		if cfg.TLSConfig != nil {
			cfg.TLSConfig.ServerName = s.TLS.ServerName
		}
		for _, fb := range cfg.Fallbacks {
			if fb.TLSConfig != nil {
				fb.TLSConfig.ServerName = s.TLS.ServerName
			}
		}
	}
	return cfg, nil
}
